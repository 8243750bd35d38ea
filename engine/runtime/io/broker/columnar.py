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
from typing import Any

import numpy as np
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


def entries_batch(spec: StreamSpec, entries: Sequence[Any], schema: pa.Schema) -> pa.RecordBatch:
    """The rows of ``entries`` (``[id, [name, value, ...]]`` each, as the server sent them)
    as one record batch of ``schema`` (the source's columns as Spark reads them)."""
    columns = _columns(entries) if spec.payload == "fields" and entries else None
    batch = None if columns is None else _bulk(spec, *columns, schema)
    if batch is None:
        rows = [decode_entry(spec, entry_id.decode(), dict(zip(f[0::2], f[1::2], strict=True)))
                for entry_id, f in entries]
        batch = rows_batch(rows, schema)
    return batch


def rows_batch(rows: Sequence[tuple[Any, ...]], schema: pa.Schema) -> pa.RecordBatch:
    """Decoded rows as one record batch of ``schema``."""
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
    return pa.RecordBatch.from_arrays(
        [pa.array(list(values), type=field.type) for values, field in zip(columns, schema,
                                                                            strict=True)],
        schema=schema)


def _columns(entries: Sequence[Any]) -> tuple[pa.BinaryArray, dict[bytes, pa.Array]] | None:
    """The entries' ids and each field's values, if every entry has the same distinct fields
    in the same order: the fields cross into Arrow in one conversion, not one per column."""
    names = entries[0][1][0::2]
    fields = pa.array([entry[1] for entry in entries], pa.list_(pa.binary()))
    width, at = 2 * len(names), np.arange(0, 2 * len(names) * len(entries), 2 * len(names))
    if len(set(names)) != len(names) or len(entries[0][1]) != width or pc.any(pc.not_equal(
            pc.list_value_length(fields), width)).as_py():
        return None
    flat = fields.flatten()
    if not all(pc.all(pc.equal(flat.take(at + 2 * i), name)).as_py()
               for i, name in enumerate(names)):
        return None
    return (pa.array([entry[0] for entry in entries], pa.binary()),
            {name: flat.take(at + 2 * i + 1) for i, name in enumerate(names)})


def _bulk(spec: StreamSpec, ids: pa.BinaryArray, fields: dict[bytes, pa.Array],
          schema: pa.Schema) -> pa.RecordBatch | None:
    """The batch decoded column by column, or None if some value needs the entry-by-entry
    way."""
    arrays = []
    for (column_name, kind), field in zip(spec.columns, schema, strict=False):
        values = fields.get(column_name.encode())
        column = None if values is None else _typed(kind, field.type, values)
        if column is None:
            return None
        arrays.append(column)
    if spec.adds_entry_time:
        times = _entry_times(ids, schema.field(len(arrays)).type)
        if times is None:
            return None
        arrays.append(times)
    arrays.append(pa.nulls(len(ids), pa.string()))  # no dead letter
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _typed(kind: str, target: pa.DataType, values: pa.BinaryArray) -> pa.Array | None:
    try:
        text = values.cast(pa.string())  # refuses invalid UTF-8
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


def _entry_times(ids: pa.BinaryArray, target: pa.DataType) -> pa.Array | None:
    """The entry ids' times: their milliseconds part."""
    try:
        text = ids.cast(pa.string())
        ms = pc.list_element(pc.split_pattern(text, "-", max_splits=1), 0).cast(pa.int64())
    except pa.ArrowInvalid:
        return None
    return _from_ms(ms, target)


def _from_ms(ms: pa.Array, target: pa.DataType) -> pa.Array | None:
    low, high = pc.min_max(ms).values()
    if low.as_py() is None or low.as_py() <= -_EXACT_MS or high.as_py() >= _EXACT_MS:
        return None
    return pc.multiply(ms, 1000).cast(target)
