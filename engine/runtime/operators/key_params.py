"""The params every keyed operator reads: its key columns, event-time column and watermark."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.runtime.errors import UnsupportedJobError
from engine.runtime.operators.durations import parse_duration_us


@dataclass(frozen=True)
class KeyedSpec:
    """What the parsed params of every keyed operator (window, join, dedupe) begin with."""

    operator: str
    keys: tuple[str, ...]
    time: str
    watermark_us: int


def keyed_params(operator: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The ``KeyedSpec`` fields read from ``params``; errors name the operator and param."""
    where = f"operator {operator!r}"
    return {
        "operator": operator,
        "keys": key_columns(params, where),
        "time": str(params.get("time", "event_time")),
        "watermark_us": parse_duration_us(params.get("watermark", "0 seconds"),
                                          f"{where} watermark"),
    }


def key_columns(params: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """The ``key`` columns (one name or a list); ``where`` names the operator in the error."""
    keys = params.get("key")
    keys = [keys] if isinstance(keys, str) else keys
    if not keys or not all(isinstance(k, str) for k in keys):
        raise UnsupportedJobError(f"{where}: 'key' must name one or more columns")
    return tuple(keys)
