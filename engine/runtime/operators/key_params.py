"""The ``key`` param every keyed operator reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.runtime.errors import UnsupportedJobError


def key_columns(params: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """The ``key`` columns (one name or a list); ``where`` names the operator in the error."""
    keys = params.get("key")
    keys = [keys] if isinstance(keys, str) else keys
    if not keys or not all(isinstance(k, str) for k in keys):
        raise UnsupportedJobError(f"{where}: 'key' must name one or more columns")
    return tuple(keys)
