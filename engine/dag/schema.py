"""Output columns of every operator, inferred in topological order, and column checks.

A schema is an ordered mapping column -> Spark type name ("long", "timestamp", ...);
"unknown" marks a computed column whose type needs Spark to tell. A ``None`` schema
means the columns are not known at all (a file source without a ``schema`` param), and
the checks that depend on them are skipped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from engine.dag.catalog import BROKER_SOURCE_TYPES, GENERATOR_SCHEMA, OPERATOR_TYPES, RATE_SCHEMA
from engine.dag.expressions import unknown_column_message, unknown_columns
from engine.dag.model import JobGraph, Operator
from engine.dag.syntax import COLUMN_NAME, interval_seconds, parse_aggregate
from engine.errors import Problem

Schema = dict[str, str]
NUMERIC = frozenset({"long", "int", "integer", "double", "float", "short", "byte", "decimal",
                     "bigint", "smallint", "tinyint", "unknown"})
MAX_WINDOWS_PER_ROW = 1000
"""A sliding window's window/slide: the windows each row is added to (and kept per key)."""


def output_columns(graph: JobGraph) -> dict[str, dict[str, str]]:
    """Column -> type of every operator's output; {} where the columns are unknown."""
    schemas, _ = infer_schemas(graph)
    return {op_id: dict(schema or {}) for op_id, schema in schemas.items()}


def infer_schemas(graph: JobGraph) -> tuple[dict[str, Schema | None], list[Problem]]:
    """Each operator's output schema, plus the column problems found on the way.

    The graph must be acyclic and its operator types known.
    """
    schemas: dict[str, Schema | None] = {}
    problems: list[Problem] = []
    for op_id in graph.topological_order():
        op = graph.operator(op_id)
        inputs = [schemas[parent] for parent in graph.parents(op_id)]
        schema, found = _infer_one(op, inputs, graph.parents(op_id))
        schemas[op_id] = schema
        problems.extend(found)
    return schemas, problems


def _infer_one(op: Operator, inputs: list[Schema | None],
               parents: tuple[str, ...]) -> tuple[Schema | None, list[Problem]]:
    where = f"operator {op.id!r}"
    role = OPERATOR_TYPES[op.type].role
    if role == "source":
        return _source_schema(op), []
    if op.type == "join":
        return _join_schema(op, inputs, where)
    schema, problems = _union_schema(inputs, parents, where)
    if schema is None:
        return None, problems
    problems += _expression_column_problems(op, schema, where)
    if op.type == "map":
        return _map_schema(op, schema), problems
    if op.type == "window_aggregate":
        result, found = _aggregate_schema(op, schema, where)
        return result, problems + found
    if op.type == "dedupe":
        problems += _key_time_problems(op, schema, where, "input")
    return schema, problems


def _source_schema(op: Operator) -> Schema | None:
    if op.type == "source.generator":
        return dict(GENERATOR_SCHEMA)
    if op.type == "source.rate":
        return dict(RATE_SCHEMA)
    declared = op.params.get("schema")
    if not isinstance(declared, Mapping):
        return None
    schema = {str(k): str(v).lower() for k, v in declared.items()}
    if op.type in BROKER_SOURCE_TYPES and not op.params.get("time_field"):
        schema.setdefault("event_time", "timestamp")  # the entry's time in the broker
    return schema


def _union_schema(inputs: list[Schema | None], parents: tuple[str, ...],
                  where: str) -> tuple[Schema | None, list[Problem]]:
    if not inputs or any(schema is None for schema in inputs):
        return None, []
    first = inputs[0]
    assert first is not None
    problems = []
    for parent, schema in zip(parents[1:], inputs[1:], strict=True):
        assert schema is not None
        if not _compatible(first, schema):
            problems.append(Problem(
                where,
                f"union inputs disagree on columns: {parents[0]} gives {_show(first)}, "
                f"{parent} gives {_show(schema)}",
            ))
    return dict(first), problems


def _compatible(left: Schema, right: Schema) -> bool:
    if set(left) != set(right):
        return False
    return all(left[c] == right[c] or "unknown" in (left[c], right[c]) for c in left)


def _show(schema: Schema) -> str:
    return "(" + ", ".join(f"{c} {t}" for c, t in schema.items()) + ")"


def _expression_column_problems(op: Operator, schema: Schema, where: str) -> list[Problem]:
    """Columns that a filter's condition or a map's expressions refer to but the input lacks."""
    texts: list[tuple[str, object]] = []
    if op.type == "filter":
        texts.append(("param 'condition'", op.params.get("condition")))
    elif op.type == "map" and isinstance(op.params.get("columns"), Mapping):
        texts += [(f"column {name!r}", text) for name, text in op.params["columns"].items()]
    return [Problem(where, f"{what}: {unknown_column_message(column, schema)}")
            for what, text in texts if isinstance(text, str)
            for column in unknown_columns(text, schema)]


def _map_schema(op: Operator, schema: Schema) -> Schema:
    result = dict(schema)
    columns = op.params.get("columns")
    if isinstance(columns, Mapping):
        for name, expression in columns.items():
            result[str(name)] = _expression_type(str(expression), schema)
    return result


def _expression_type(expression: str, schema: Schema) -> str:
    text = expression.strip()
    if COLUMN_NAME.match(text) and text in schema:
        return schema[text]
    if re.fullmatch(r"-?\d+", text):
        return "int"
    if re.fullmatch(r"-?\d+\.\d*(e-?\d+)?", text, re.IGNORECASE):
        return "double"
    if re.fullmatch(r"'[^']*'", text):
        return "string"
    cast = re.fullmatch(r"(?i)cast\s*\(.*\s+as\s+(\w+)\s*\)", text, re.DOTALL)
    return cast.group(1).lower() if cast else "unknown"


def _key_time_problems(op: Operator, schema: Schema, where: str, side: str) -> list[Problem]:
    problems = []
    key = op.params.get("key")
    for column in key if isinstance(key, list) else []:
        if isinstance(column, str) and column not in schema:
            problems.append(Problem(where, f"key column {column!r} is not in the {side} "
                                           f"columns {sorted(schema)}"))
    time = op.params.get("time")
    if isinstance(time, str):
        if time not in schema:
            problems.append(Problem(where, f"time column {time!r} is not in the {side} "
                                           f"columns {sorted(schema)}"))
        elif schema[time] not in ("timestamp", "unknown"):
            problems.append(Problem(where, f"time column {time!r} has type {schema[time]}, "
                                           "not timestamp"))
    return problems


def _aggregate_schema(op: Operator, schema: Schema, where: str) -> tuple[Schema, list[Problem]]:
    problems = _key_time_problems(op, schema, where, "input")
    problems += _window_problems(op, where)
    key = op.params.get("key")
    result: Schema = {c: schema.get(c, "unknown") for c in key if isinstance(c, str)} \
        if isinstance(key, list) else {}
    result["window_start"] = "timestamp"
    result["window_end"] = "timestamp"
    aggregates = op.params.get("aggregates")
    for name, text in (aggregates.items() if isinstance(aggregates, Mapping) else []):
        parsed = parse_aggregate(str(text))
        if parsed is None:
            continue
        column_type, problem = _aggregate_type(parsed, schema)
        if problem is not None:
            problems.append(Problem(where, f"aggregate {name!r}: {problem}"))
        result[str(name)] = column_type
    return result, problems


def _aggregate_type(parsed: tuple[str, str], schema: Schema) -> tuple[str, str | None]:
    function, column = parsed
    if column == "*":
        return "long", None
    if column not in schema:
        return "unknown", f"column {column!r} is not in the input columns {sorted(schema)}"
    column_type = schema[column]
    if function == "count":
        return "long", None
    if function in ("sum", "avg") and column_type not in NUMERIC:
        return "unknown", f"{function} needs a numeric column, {column!r} is {column_type}"
    if function == "avg":
        return "double", None
    if function == "sum":
        return ("double" if column_type in ("double", "float") else column_type), None
    return column_type, None


def _window_problems(op: Operator, where: str) -> list[Problem]:
    window, slide = op.params.get("window"), op.params.get("slide")
    if not isinstance(window, str) or not isinstance(slide, str):
        return []
    window_s, slide_s = interval_seconds(window), interval_seconds(slide)
    if window_s is None or slide_s is None:
        return []
    if slide_s > window_s:
        return [Problem(where, f"slide {slide!r} is longer than window {window!r}")]
    # Each row is added to window/slide windows, and each window is state kept per key.
    if window_s / slide_s > MAX_WINDOWS_PER_ROW:
        return [Problem(where, f"window {window!r} over slide {slide!r} puts each row in "
                               f"{math.ceil(window_s / slide_s):,} windows, at most "
                               f"{MAX_WINDOWS_PER_ROW:,}: use a longer slide")]
    return []


def _join_schema(op: Operator, inputs: list[Schema | None],
                 where: str) -> tuple[Schema | None, list[Problem]]:
    if len(inputs) != 2:
        return None, []  # the input count is reported by the structure checks
    left, right = inputs
    problems: list[Problem] = []
    if left is not None:
        problems += _key_time_problems(op, left, where, "left input")
    if right is not None:
        problems += _key_time_problems(op, right, where, "right input")
    if left is None or right is None:
        return None, problems
    # Join output: the left columns, then the right columns the left side does not have.
    result = dict(left)
    result.update({c: t for c, t in right.items() if c not in result})
    return result, problems
