"""Checks across the params of a broker source (each param alone is checked in params.py)."""

from __future__ import annotations

from collections.abc import Mapping

from engine.dag.catalog import BROKER_SOURCE_TYPES
from engine.dag.model import Operator
from engine.errors import Problem

# Column types an entry's text or JSON value can be decoded to.
DECODABLE_TYPES = frozenset({"string", "long", "int", "integer", "bigint", "short", "smallint",
                             "byte", "tinyint", "double", "float", "boolean", "timestamp"})


def source_param_problems(op: Operator) -> list[Problem]:
    """Problems between the params of ``op`` if it is a broker source."""
    if op.type not in BROKER_SOURCE_TYPES:
        return []
    where = f"operator {op.id!r}"
    schema = op.params.get("schema")
    schema = schema if isinstance(schema, Mapping) else {}
    problems = [
        Problem(where, f"schema column {name!r}: type {kind!r} cannot be decoded from a stream "
                       f"entry (use one of {sorted(DECODABLE_TYPES)})")
        for name, kind in schema.items()
        if isinstance(kind, str) and kind.lower() not in DECODABLE_TYPES
    ]
    time_field = op.params.get("time_field")
    if isinstance(time_field, str) and schema:
        if time_field not in schema:
            problems.append(Problem(where, f"time_field {time_field!r} is not a schema column "
                                           f"{sorted(schema)}"))
        elif str(schema[time_field]).lower() != "timestamp":
            problems.append(Problem(where, f"time_field {time_field!r} must have type "
                                           f"timestamp, not {schema[time_field]}"))
    start, streams = op.params.get("start"), op.params.get("streams")
    if isinstance(start, Mapping) and isinstance(streams, list):
        missing = sorted(set(map(str, streams)) - set(start))
        extra = sorted(set(start) - set(map(str, streams)))
        if missing or extra:
            what = "a sequence" if op.type == "source.nats" else "an entry id"
            problems.append(Problem(where, f"start must give {what} for exactly the streams "
                                           f"(missing {missing}, not a stream {extra})"))
    return problems
