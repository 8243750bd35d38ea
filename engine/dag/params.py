"""Checks of an operator's params against the param schema of its catalog type."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from engine.dag.catalog import COLUMN_TYPES, OPERATOR_TYPES, OperatorType, ParamKind, ParamSpec
from engine.dag.expressions import expression_problems
from engine.dag.model import Operator
from engine.dag.syntax import (
    COLUMN_NAME,
    TABLE_NAME,
    interval_seconds,
    parse_aggregate,
)
from engine.errors import Problem

EVENT_TYPES = ("view", "click", "purchase")
MAX_INT = 2**31 - 1
MAX_STRING = 1000
MAX_ENTRIES = 200
FILE_FORMATS = ("json", "csv", "parquet")
START_POSITIONS = ("earliest", "latest")
PAYLOADS = ("fields", "json")
ENTRY_ID = re.compile(r"^\d+(-\d+)?$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Check = Callable[[Any], str | None]
"""A param value's problem, or None if it is fine."""


def params_with_defaults(op: Operator) -> dict[str, Any]:
    """The operator's params with the catalog defaults filled in."""
    op_type = OPERATOR_TYPES.get(op.type)
    merged = op_type.defaults() if op_type is not None else {}
    merged.update(op.params)
    return merged


def param_problems(op: Operator, op_type: OperatorType) -> list[Problem]:
    """Missing, unknown and ill-typed params of ``op``, one problem each."""
    where = f"operator {op.id!r}"
    problems: list[Problem] = []
    for spec in op_type.params:
        if spec.name not in op.params:
            if spec.required:
                problems.append(Problem(where, f"missing required param {spec.name!r}"))
            continue
        message = _value_problem(spec, op.params[spec.name])
        if message is not None:
            problems.append(Problem(where, f"param {spec.name!r}: {message}"))
    known = {spec.name for spec in op_type.params}
    for name in op.params:
        if name not in known:
            allowed = ", ".join(sorted(known)) or "none"
            problems.append(
                Problem(where, f"unknown param {name!r} for type {op_type.name} "
                               f"(allowed: {allowed})")
            )
    return problems


def _value_problem(spec: ParamSpec, value: Any) -> str | None:
    # The param's own bound first: it is the one to name, not the type's wider one.
    if spec.maximum is not None and _is_number(value) and abs(value) > spec.maximum:
        bound = _bound_text(spec.maximum)
        if spec.kind == "int":
            return f"must be from -{bound} to {bound}, got {value!r}"
        return f"must be at most {bound}, got {value!r}"
    return _CHECKS[spec.kind](value)


def _is_number(value: Any) -> bool:
    """A finite int or float (inf and nan get the type's own message)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or math.isfinite(value)


def _bound_text(bound: float) -> str:
    """10000000 -> "10,000,000"; 0.5 -> "0.5"."""
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive_int(value: Any) -> str | None:
    if not _is_int(value) or value <= 0:
        return f"must be an integer > 0, got {value!r}"
    if value > MAX_INT:
        return f"must be an integer from 1 to {MAX_INT}, got {value!r}"
    return None


def _int(value: Any) -> str | None:
    if not _is_int(value) or abs(value) > MAX_INT:
        return f"must be an integer of at most {MAX_INT} in size, got {value!r}"
    return None


def _non_negative_float(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        return f"must be a number >= 0, got {value!r}"
    if not math.isfinite(value):
        return f"must be a finite number >= 0, got {value!r}"
    return None


def _string(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return f"must be a non-empty string, got {value!r}"
    if len(value) > MAX_STRING or not value.isprintable():
        return f"must be at most {MAX_STRING} printable characters"
    return None


def _text_check(is_valid: Callable[[str], object], wanted: str) -> Check:
    """The check of a param that must be a string ``is_valid`` accepts, saying what is
    ``wanted`` otherwise."""

    def check(value: Any) -> str | None:
        if isinstance(value, str) and is_valid(value):
            return None
        return f"must be {wanted}, got {value!r}"

    return check


def _one_of(choices: tuple[str, ...]) -> Check:
    """The check of a param that must be one of ``choices``."""

    def check(value: Any) -> str | None:
        return None if value in choices else f"must be one of {list(choices)}, got {value!r}"

    return check


_identifier = _text_check(TABLE_NAME.match, "an identifier like my_table")
_column = _text_check(COLUMN_NAME.match, "a column name")
_interval = _text_check(
    lambda text: interval_seconds(text) is not None,
    "an interval like '10 seconds' or '1 minute', from 1 millisecond to 366 days")
_aggregate = _text_check(
    lambda text: parse_aggregate(text) is not None,
    "one of count(*), count(col), sum(col), min(col), max(col), avg(col)")


def _expression(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"must be a Spark SQL expression string, got {value!r}"
    problems = expression_problems(value)
    return None if not problems else f"bad expression {_short(value)}: {'; '.join(problems)}"


def _short(text: str, limit: int = 120) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _columns(value: Any) -> str | None:
    # Every list of columns is a key: the runtime partitions state by it, so it needs one.
    if not isinstance(value, list) or not value or len(value) > MAX_ENTRIES or any(
            _column(v) for v in value):
        return f"must be a list of 1 to {MAX_ENTRIES} column names, got {value!r}"
    if len(set(value)) != len(value):
        return f"lists a column twice: {value!r}"
    return None


def _mapping_of(check: Check, what: str) -> Check:
    def check_mapping(value: Any) -> str | None:
        if not isinstance(value, Mapping) or not value:
            return f"must be a non-empty object of {what}, got {value!r}"
        if len(value) > MAX_ENTRIES:
            return f"has {len(value)} entries, at most {MAX_ENTRIES} are allowed"
        for name, item in value.items():
            if _column(name):
                return f"{name!r} is not a column name"
            problem = check(item)
            if problem is not None:
                return f"{name!r}: {problem}"
        return None

    return check_mapping


def _column_type(value: Any) -> str | None:
    if not isinstance(value, str) or value.lower() not in COLUMN_TYPES:
        return f"unknown column type {value!r}"
    return None


def _string_list(value: Any) -> str | None:
    if not isinstance(value, list) or not value or any(v not in EVENT_TYPES for v in value):
        return f"must be a non-empty list drawn from {list(EVENT_TYPES)}, got {value!r}"
    return None


def _data_path(value: Any) -> str | None:
    problem = _string(value)
    if problem is not None:
        return problem
    parts = value.replace("\\", "/").split("/")
    if value.startswith(("/", "~")) or ":" in value or ".." in parts:
        return (f"must be a folder relative to the data folder, without '..' or a leading '/', "
                f"got {value!r}")
    return None


def _redis_url(value: Any) -> str | None:
    return _broker_url(value, schemes=("redis", "rediss", "unix"), like="redis://host:6379/0",
                       hostless=("unix",))


def _nats_url(value: Any) -> str | None:
    return _broker_url(value, schemes=("nats", "tls"), like="nats://host:4222", pathless=True)


def _broker_url(value: Any, *, schemes: tuple[str, ...], like: str,
                hostless: tuple[str, ...] = (), pathless: bool = False) -> str | None:
    """A broker's URL with one of ``schemes`` (a path only if not ``pathless``, a host unless
    its scheme is ``hostless``), or env:NAME, the URL in the driver's environment."""
    if isinstance(value, str) and (len(value) > MAX_STRING or not value.isprintable()):
        return f"must be at most {MAX_STRING} printable characters"
    if isinstance(value, str) and value.startswith("env:"):
        name = value[len("env:"):]
        return None if ENV_NAME.match(name) else f"names no environment variable: {value!r}"
    try:
        parts = urlsplit(value) if isinstance(value, str) else None
        if parts is not None:
            parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        parts = None
    if (parts is None or parts.scheme not in schemes
            or (pathless and parts.path not in ("", "/"))):
        named = f"{', '.join(schemes[:-1])} or {schemes[-1]}"
        return (f"must be a URL like {like} ({named} scheme) "
                "or env:NAME (the URL in the driver's environment variable NAME)")
    if parts.scheme not in hostless and not parts.hostname:
        return "names no host"
    return None


def _sequence_start(value: Any) -> str | None:
    if value in START_POSITIONS:
        return None
    if isinstance(value, Mapping) and value and all(
        isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63 for v in value.values()
    ):
        return None
    return f"must be earliest, latest or {{stream: sequence number like 41}}, got {value!r}"


def _stream_names(value: Any) -> str | None:
    if not isinstance(value, list) or not value or any(
        not isinstance(v, str) or not v.strip() for v in value
    ):
        return f"must be a non-empty list of stream keys, got {value!r}"
    if len(value) > MAX_ENTRIES or any(_string(v) for v in value):
        return f"must be at most {MAX_ENTRIES} keys of at most {MAX_STRING} printable characters"
    return None if len(set(value)) == len(value) else f"lists a stream twice: {value!r}"


def _stream_start(value: Any) -> str | None:
    if value in START_POSITIONS:
        return None
    if isinstance(value, Mapping) and value and all(
        isinstance(v, str) and ENTRY_ID.match(v) for v in value.values()
    ):
        return None
    return f"must be earliest, latest or {{stream: entry id like 1700000000000-0}}, got {value!r}"


_CHECKS: dict[ParamKind, Check] = {
    "positive_int": _positive_int,
    "int": _int,
    "non_negative_float": _non_negative_float,
    "string": _string,
    "identifier": _identifier,
    "expression": _expression,
    "interval": _interval,
    "column": _column,
    "columns": _columns,
    "expressions": _mapping_of(_expression, "column -> expression"),
    "aggregates": _mapping_of(_aggregate, "name -> aggregate"),
    "schema": _mapping_of(_column_type, "column -> type"),
    "string_list": _string_list,
    "file_format": _one_of(FILE_FORMATS),
    "data_path": _data_path,
    "redis_url": _redis_url,
    "stream_names": _stream_names,
    "stream_start": _stream_start,
    "stream_payload": _one_of(PAYLOADS),
    "nats_url": _nats_url,
    "sequence_start": _sequence_start,
}
