"""Broker entries decoded in bulk: a chunk of entries becomes one Arrow record batch by one
cast per column, with no conversion per value in Python.

The bulk way holds when every entry of the chunk has the same fields in the same order (as
a producer writes them) and every value of a column converts; otherwise the chunk is
decoded entry by entry (``decode_entry``), which turns each entry that does not fit into a
dead letter naming it. Both ways give the same rows: a cast here accepts no value that
``decode_entry`` refuses, and a value it cannot convert exactly sends the chunk the slow way.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.io.broker.spec import FLOAT_KINDS, INT_KINDS, StreamSpec, decode_entry

# Epoch milliseconds whose microseconds the bulk way gives as ``decode_entry`` does: below
# 2**32 seconds, ``ms / 1000.0`` is within half a microsecond of the exact time, so the
# entry-by-entry rounding lands on ``ms * 1000`` too.
_EXACT_MS = 2**32 * 1000
# Values cast in bulk, a subset of what Python's int() and float() read (Arrow's casts also
# read hexadecimal, which Python refuses); the rest goes entry by entry.
_MILLIS = r"^-?[0-9]+$"  # what ``decode_entry`` reads as epoch milliseconds, ASCII only
_INT = r"^[+-]?[0-9]+$"
_FLOAT = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"


_ARROW_TYPES = {"string": pa.string(), "long": pa.int64(), "bigint": pa.int64(),
                "int": pa.int32(), "integer": pa.int32(), "short": pa.int16(),
                "smallint": pa.int16(), "byte": pa.int8(), "tinyint": pa.int8(),
                "double": pa.float64(), "float": pa.float32(), "boolean": pa.bool_(),
                "timestamp": pa.timestamp("us", tz="UTC")}


def arrow_schema(spec: StreamSpec) -> pa.Schema:
    """The source's rows as Spark reads them from Arrow (timestamps in micros, UTC), known
    without a Spark session, so entries can be decoded off the epoch's thread."""
    return pa.schema([(name, _ARROW_TYPES[kind]) for name, kind in spec.output_columns()])


def entries_batch(spec: StreamSpec, ids: Sequence[bytes], fields: Sequence[Sequence[bytes]],
                  schema: pa.Schema) -> pa.RecordBatch:
    """The rows of entries ``ids`` with ``fields`` (each flat: name, value, name, value...)
    as one record batch of ``schema`` (the source's columns as Spark reads them)."""
    batch = _bulk(spec, ids, fields, schema) if spec.payload == "fields" and ids else None
    if batch is None:
        rows = [decode_entry(spec, entry_id.decode(), dict(zip(f[0::2], f[1::2], strict=True)))
                for entry_id, f in zip(ids, fields, strict=True)]
        batch = rows_batch(rows, schema)
    return batch


def rows_batch(rows: Sequence[tuple[Any, ...]], schema: pa.Schema) -> pa.RecordBatch:
    """Decoded rows as one record batch of ``schema``."""
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
    return pa.RecordBatch.from_arrays(
        [pa.array(list(values), type=field.type) for values, field in zip(columns, schema,
                                                                            strict=True)],
        schema=schema)


def _bulk(spec: StreamSpec, ids: Sequence[bytes], fields: Sequence[Sequence[bytes]],
          schema: pa.Schema) -> pa.RecordBatch | None:
    """The batch decoded column by column, or None if some entry or value needs the
    entry-by-entry way."""
    width, count = len(fields[0]), len(fields)
    names = list(fields[0][0::2])
    if width % 2 or len(set(names)) != len(names) or set(map(len, fields)) != {width}:
        return None
    flat = list(chain.from_iterable(fields))
    at = {}
    for index, name in enumerate(names):
        if flat[2 * index::width].count(name) != count:  # not the same layout in every entry
            return None
        at[name] = 2 * index + 1
    arrays = []
    for (column_name, kind), field in zip(spec.columns, schema, strict=False):
        where = at.get(column_name.encode())
        column = None if where is None else _typed(kind, field.type, flat[where::width])
        if column is None:
            return None
        arrays.append(column)
    if spec.adds_entry_time:
        times = _entry_times(ids, schema.field(len(arrays)).type)
        if times is None:
            return None
        arrays.append(times)
    arrays.append(pa.nulls(count, pa.string()))  # no dead letter
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _typed(kind: str, target: pa.DataType, values: list[bytes]) -> pa.Array | None:
    try:
        text = pa.array(values, pa.binary()).cast(pa.string())  # refuses invalid UTF-8
        if kind == "string":
            return text
        if kind in INT_KINDS or kind in FLOAT_KINDS:
            if not _all_match(text, _INT if kind in INT_KINDS else _FLOAT):
                return None
            return text.cast(target)
        if kind == "boolean":
            lower = pc.utf8_lower(text)
            if not pc.all(pc.is_in(lower, pa.array(["true", "false", "1", "0"]))).as_py():
                return None
            return pc.is_in(lower, pa.array(["true", "1"]))
        if kind == "timestamp":
            if not _all_match(text, _MILLIS):
                return None  # ISO-8601 strings, blanks: entry by entry
            return _from_ms(text.cast(pa.int64()), target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return None


def _all_match(text: pa.Array, pattern: str) -> bool:
    return bool(pc.all(pc.match_substring_regex(text, pattern)).as_py())


def _entry_times(ids: Sequence[bytes], target: pa.DataType) -> pa.Array | None:
    """The entry ids' times: their milliseconds part."""
    text = pa.array(ids, pa.binary()).cast(pa.string())
    try:
        ms = pc.list_element(pc.split_pattern(text, "-", max_splits=1), 0).cast(pa.int64())
    except pa.ArrowInvalid:
        return None
    return _from_ms(ms, target)


def _from_ms(ms: pa.Array, target: pa.DataType) -> pa.Array | None:
    low, high = pc.min_max(ms).values()
    if low.as_py() is None or low.as_py() <= -_EXACT_MS or high.as_py() >= _EXACT_MS:
        return None
    return pc.multiply(ms, 1000).cast(target)
