"""Checks of an operator's params against the param schema of its catalog type."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from engine.dag.catalog import COLUMN_TYPES, OPERATOR_TYPES, OperatorType, ParamSpec
from engine.dag.model import Operator
from engine.dag.syntax import (
    COLUMN_NAME,
    TABLE_NAME,
    expression_problem,
    interval_seconds,
    parse_aggregate,
)
from engine.errors import Problem

EVENT_TYPES = ("view", "click", "purchase")
FILE_FORMATS = ("json", "csv", "parquet")


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
    return _CHECKS[spec.kind](value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive_int(value: Any) -> str | None:
    if not _is_int(value) or value <= 0:
        return f"must be an integer > 0, got {value!r}"
    return None


def _int(value: Any) -> str | None:
    return None if _is_int(value) else f"must be an integer, got {value!r}"


def _non_negative_float(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        return f"must be a number >= 0, got {value!r}"
    return None


def _string(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return f"must be a non-empty string, got {value!r}"
    return None


def _identifier(value: Any) -> str | None:
    if not isinstance(value, str) or not TABLE_NAME.match(value):
        return f"must be an identifier like my_table, got {value!r}"
    return None


def _expression(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"must be a Spark SQL expression string, got {value!r}"
    problem = expression_problem(value)
    return None if problem is None else f"bad expression {value!r}: {problem}"


def _interval(value: Any) -> str | None:
    if not isinstance(value, str) or interval_seconds(value) is None:
        return f"must be an interval like '10 seconds' or '1 minute', got {value!r}"
    return None


def _column(value: Any) -> str | None:
    if not isinstance(value, str) or not COLUMN_NAME.match(value):
        return f"must be a column name, got {value!r}"
    return None


def _columns(value: Any) -> str | None:
    if not isinstance(value, list) or any(_column(v) for v in value):
        return f"must be a list of column names, got {value!r}"
    if len(set(value)) != len(value):
        return f"lists a column twice: {value!r}"
    return None


def _mapping_of(check: Callable[[Any], str | None], what: str) -> Callable[[Any], str | None]:
    def check_mapping(value: Any) -> str | None:
        if not isinstance(value, Mapping) or not value:
            return f"must be a non-empty object of {what}, got {value!r}"
        for name, item in value.items():
            if _column(name):
                return f"{name!r} is not a column name"
            problem = check(item)
            if problem is not None:
                return f"{name!r}: {problem}"
        return None

    return check_mapping


def _aggregate(value: Any) -> str | None:
    if not isinstance(value, str) or parse_aggregate(value) is None:
        return (f"must be one of count(*), count(col), sum(col), min(col), max(col), "
                f"avg(col), got {value!r}")
    return None


def _column_type(value: Any) -> str | None:
    if not isinstance(value, str) or value.lower() not in COLUMN_TYPES:
        return f"unknown column type {value!r}"
    return None


def _string_list(value: Any) -> str | None:
    if not isinstance(value, list) or not value or any(v not in EVENT_TYPES for v in value):
        return f"must be a non-empty list drawn from {list(EVENT_TYPES)}, got {value!r}"
    return None


def _file_format(value: Any) -> str | None:
    return None if value in FILE_FORMATS else f"must be one of {list(FILE_FORMATS)}, got {value!r}"


_CHECKS: dict[str, Callable[[Any], str | None]] = {
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
    "file_format": _file_format,
}
