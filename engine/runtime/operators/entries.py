"""Rows as strings and back, vectorised: how the keyed operators name a key and store its
value in the state store (which holds strings) without a Python step per row.

A row's columns are cast to strings (Arrow's casts round-trip: floats print their shortest
exact form), escaped so the separator never occurs inside a value, marked valid (``v``) or
null (``n``) and joined with the separator. Decoding splits and casts back.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.errors import UnsupportedJobError
from engine.runtime.state.sorted_runs import one_chunk

SEP = "\x1f"
ROW = "\x1d"  # between rows, where one value holds several (``encode_rows``)
_ESC = "\x1e"

_SUPPORTED = (
    pa.types.is_integer,
    pa.types.is_floating,
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_boolean,
    pa.types.is_timestamp,
)


class EntryTypeError(UnsupportedJobError):
    """A column type the keyed layout cannot store."""


def check_types(schema: pa.Schema, columns: list[str]) -> None:
    """Raises EntryTypeError naming the first column whose type is not storable."""
    for name in columns:
        kind = schema.field(name).type
        if not any(test(kind) for test in _SUPPORTED):
            raise EntryTypeError(f"column {name!r} of type {kind} cannot be kept as keyed state")


def encode(table: pa.Table, columns: list[str]) -> pa.Array:
    """One string per row holding ``columns`` (each escaped and flagged)."""
    parts = []
    for name in columns:
        column = table[name]
        if pa.types.is_timestamp(column.type):
            column = pc.cast(column, pa.int64())
        text = pc.cast(column, pa.string())
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            text = pc.replace_substring(text, _ESC, _ESC + "e")
            text = pc.replace_substring(text, SEP, _ESC + "s")
            text = pc.replace_substring(text, ROW, _ESC + "r")
        flagged = pc.binary_join_element_wise("v", text, "")
        parts.append(pc.fill_null(flagged, "n"))
    if len(parts) == 1:
        return one_chunk(parts[0])
    return one_chunk(pc.binary_join_element_wise(*parts, SEP))


def decode(encoded: pa.Array | pa.ChunkedArray, schema: pa.Schema) -> pa.Table:
    """The columns of ``schema`` from strings made by ``encode`` in that order."""
    if len(schema) == 1:
        pieces = [encoded]
    else:
        split = pc.split_pattern(encoded, SEP)
        pieces = [pc.list_element(split, i) for i in range(len(schema))]
    columns = [_decode_one(piece, field.type) for piece, field in zip(pieces, schema, strict=True)]
    return pa.Table.from_arrays(columns, schema=schema)


def _decode_one(piece: pa.Array | pa.ChunkedArray, kind: pa.DataType) -> pa.Array:
    valid = pc.equal(pc.utf8_slice_codeunits(piece, 0, 1), "v")
    text = pc.utf8_slice_codeunits(piece, 1)
    text = pc.if_else(valid, text, pa.scalar(None, pa.string()))
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = pc.replace_substring(text, _ESC + "s", SEP)
        text = pc.replace_substring(text, _ESC + "r", ROW)
        return one_chunk(pc.cast(pc.replace_substring(text, _ESC + "e", _ESC), kind))
    if pa.types.is_timestamp(kind):
        return one_chunk(pc.cast(pc.cast(text, pa.int64()), kind))
    return one_chunk(pc.cast(text, kind))
