"""What a broker source reads, how it rides out its broker's restarts, and how a
``source.redis_stream`` entry becomes a row (pure Python).

An entry is decoded by the declared schema, either from its flat fields or from one field
holding a JSON object. An entry that does not fit the schema becomes a dead letter: a row
whose ``DEAD_LETTER`` column says which entry failed and why, with nulls elsewhere, so a
malformed entry is counted and sampled, never fatal.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from engine.dag.secrets import masked_url
from engine.runtime.errors import StreamRuntimeError

T = TypeVar("T")

DEAD_LETTER = "__dead_letter"
ENTRY_TIME = "event_time"  # the column of the entry id's time when no time field is given

# Bits of each integer type: a value out of its range is a dead letter, not a failed epoch.
_INT_BITS = {"long": 64, "bigint": 64, "int": 32, "integer": 32, "short": 16, "smallint": 16,
             "byte": 8, "tinyint": 8}
INT_KINDS = frozenset(_INT_BITS)
FLOAT_KINDS = frozenset({"double", "float"})


class EntryError(ValueError):
    """An entry's value does not fit its declared column type."""


class BrokerUnavailable(StreamRuntimeError):
    """The broker could not be reached within the source's reconnect time."""


@dataclass(frozen=True, kw_only=True)
class SourceSpec:
    """What the params of every broker source say, defaults applied: where it reads, how
    much an epoch takes, the declared columns, how long an unreachable broker is retried."""

    op_id: str
    url: str
    streams: tuple[str, ...]
    max_entries: int
    columns: tuple[tuple[str, str], ...]
    time_field: str | None = None
    reconnect_s: float = 30.0

    @property
    def key(self) -> tuple[str, str, tuple[str, ...]]:
        """What names the source across its plans: its operator, broker and streams."""
        return self.op_id, self.url, self.streams

    @staticmethod
    def read_params(op_id: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """The fields above, read from validated operator params (see the catalog)."""
        return {
            "op_id": op_id,
            "url": resolve_url(op_id, str(params["url"])),
            "streams": tuple(str(s) for s in params["streams"]),
            "max_entries": int(params.get("max_entries_per_epoch", 10000)),
            "columns": tuple((str(k), str(v).lower()) for k, v in params["schema"].items()),
            "time_field": params.get("time_field"),
            "reconnect_s": float(params.get("reconnect_seconds", 30.0)),
        }


def retried_while_unreachable(
    spec: SourceSpec, step: str, attempt: Callable[[], T], *, broker: str,
    unreachable: tuple[type[BaseException], ...], cause: Callable[[BaseException], str] = str,
) -> T:
    """``attempt()``, tried again with back-off while it fails as ``unreachable`` (the broker
    may be restarting) for up to ``spec.reconnect_s``; then BrokerUnavailable naming source,
    ``broker``, URL and step."""
    deadline = time.monotonic() + spec.reconnect_s
    delay = 0.2
    while True:
        try:
            return attempt()
        except unreachable as error:
            if time.monotonic() >= deadline:
                raise BrokerUnavailable(
                    f"source {spec.op_id!r}: {broker} at {masked_url(spec.url)} unreachable for "
                    f"{spec.reconnect_s:g} s while {step}: {cause(error)}"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


@dataclass(frozen=True, kw_only=True)
class StreamSpec(SourceSpec):
    """The params of one ``source.redis_stream`` operator, defaults applied."""

    start: str | dict[str, str]
    payload: str = "fields"
    payload_field: str = "data"

    @classmethod
    def from_params(cls, op_id: str, params: Mapping[str, Any]) -> StreamSpec:
        """Reads validated operator params (see the catalog)."""
        start = params.get("start", "latest")
        return cls(
            **cls.read_params(op_id, params),
            start=dict(start) if isinstance(start, Mapping) else str(start),
            payload=str(params.get("payload", "fields")),
            payload_field=str(params.get("payload_field", "data")),
        )

    def output_columns(self) -> list[tuple[str, str]]:
        """The row's columns: the declared ones, the entry time if no time field is named,
        then the dead-letter column."""
        columns = list(self.columns)
        if self.adds_entry_time:
            columns.append((ENTRY_TIME, "timestamp"))
        return [*columns, (DEAD_LETTER, "string")]

    @property
    def adds_entry_time(self) -> bool:
        """Whether rows carry the entry id's time as ``event_time`` (no time field named)."""
        return self.time_field is None and ENTRY_TIME not in dict(self.columns)

    def ddl(self) -> str:
        """The rows' schema as a Spark DDL string."""
        return ", ".join(f"`{name}` {kind}" for name, kind in self.output_columns())


def resolve_url(op_id: str, url: str) -> str:
    """``url``, or for ``env:NAME`` the URL in environment variable NAME."""
    if not url.startswith("env:"):
        return url
    name = url[len("env:"):]
    found = os.environ.get(name)
    if not found:
        raise StreamRuntimeError(
            f"source {op_id!r}: url {url!r} names environment variable {name}, which is not set"
        )
    return found


def entry_time(entry_id: str) -> datetime:
    """The time Redis gave an entry: the milliseconds part of its id."""
    return datetime.fromtimestamp(int(entry_id.split("-", 1)[0]) / 1000.0, tz=UTC)


def decode_entry(spec: StreamSpec, entry_id: str, fields: Mapping[bytes, bytes]) -> tuple[Any, ...]:
    """One row of ``spec.output_columns()``; a dead letter if the entry does not fit."""
    try:
        values = _declared_values(spec, fields)
    except EntryError as error:
        width = len(spec.output_columns()) - 1
        return (*([None] * width), f"{entry_id}: {error}")
    if spec.adds_entry_time:
        values.append(entry_time(entry_id))
    return (*values, None)


def _declared_values(spec: StreamSpec, fields: Mapping[bytes, bytes]) -> list[Any]:
    source: Mapping[str, Any]
    if spec.payload == "json":
        raw = fields.get(spec.payload_field.encode())
        if raw is None:
            raise EntryError(f"no field {spec.payload_field!r} holding the JSON payload")
        try:
            source = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as error:
            raise EntryError(f"payload is not JSON: {error}") from None
        if not isinstance(source, dict):
            raise EntryError("payload is not a JSON object")
    else:
        source = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace")
                  for k, v in fields.items()}
    values = []
    for name, kind in spec.columns:
        if name not in source:
            raise EntryError(f"missing field {name!r}")
        values.append(_typed(name, kind, source[name]))
    return values


def _typed(name: str, kind: str, value: Any) -> Any:
    if value is None:
        return None
    try:
        if kind in INT_KINDS:
            if isinstance(value, (bool, float)):
                raise ValueError
            number, bound = int(value), 2 ** (_INT_BITS[kind] - 1)
            if not -bound <= number < bound:
                raise ValueError
            return number
        if kind in FLOAT_KINDS:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if kind == "boolean":
            return _boolean(value)
        if kind == "timestamp":
            return _timestamp(value)
    except (ValueError, TypeError, OverflowError):
        raise EntryError(f"field {name!r}: {str(value)[:60]!r} is not a {kind}") from None
    return value if isinstance(value, str) else json.dumps(value)


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise ValueError


def _timestamp(value: Any) -> datetime:
    """Epoch milliseconds (a number or digits) or an ISO-8601 string (UTC if no zone)."""
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, (int, float)) or str(value).strip().lstrip("-").isdigit():
        return datetime.fromtimestamp(float(value) / 1000.0, tz=UTC)
    parsed = datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
