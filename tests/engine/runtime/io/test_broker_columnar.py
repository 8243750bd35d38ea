"""Entries decoded in bulk give exactly the rows that decoding them one by one gives, dead
letters included, and producer-shaped chunks take the bulk way."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.runtime.io.broker.columnar import _bulk, _columns, entries_batch, rows_batch
from engine.runtime.io.broker.spec import DEAD_LETTER, StreamSpec, decode_entry

SCHEMA = {"user": "long", "at": "timestamp", "price": "double", "ok": "boolean",
          "name": "string", "small": "int"}
ARROW = pa.schema([("user", pa.int64()), ("at", pa.timestamp("us", tz="UTC")),
                   ("price", pa.float64()), ("ok", pa.bool_()), ("name", pa.string()),
                   ("small", pa.int32()), ("event_time", pa.timestamp("us", tz="UTC")),
                   (DEAD_LETTER, pa.string())])
SPEC = StreamSpec.from_params("src", {"url": "redis://h", "streams": ["s"], "schema": SCHEMA})

# Values each decoder could read differently: signs, blanks, separators, other digits,
# special floats, case, ISO times, out-of-range times, invalid UTF-8.
ODD = [b"", b" 5", b"+5", b"-5", b"1_000", b"\xd9\xa3", b"1.5", b"1e3", b"nan", b"-inf",
       b"Infinity", b"0x10", b"TRUE", b"False", b" true", b"1", b"0", b"2023-11-14T22:13:20",
       b"2023-11-14 22:13:20+02:00", b"99999999999999999", b"-1700000000000", b"\xff\xfe",
       b"4294967296000", b"ann", b"9223372036854775807"]


def good(n: int) -> list[bytes]:
    return [b"user", str(n).encode(), b"at", str(1_700_000_000_000 + n).encode(),
            b"price", f"{n / 4}".encode(), b"ok", b"true" if n % 2 else b"0",
            b"name", f"u{n}".encode(), b"small", str(-n).encode()]


def one_by_one(ids: list[bytes], fields: list[list[bytes]]) -> pa.RecordBatch:
    rows = [decode_entry(SPEC, i.decode(), dict(zip(f[0::2], f[1::2], strict=True)))
            for i, f in zip(ids, fields, strict=True)]
    return rows_batch(rows, ARROW)


def entries_of(ids: list[bytes], fields: list[list[bytes]]) -> list[Any]:
    return [[i, f] for i, f in zip(ids, fields, strict=True)]  # as the server sends them


def comparable(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    return [{k: "nan" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
            for row in batch.to_pylist()]


def test_producer_shaped_entries_are_decoded_in_bulk_as_one_by_one() -> None:
    ids = [f"{1_700_000_000_000 + n}-{n % 3}".encode() for n in range(500)]
    fields = [good(n) for n in range(500)]
    columns = _columns(entries_of(ids, fields))
    assert columns is not None and _bulk(SPEC, *columns, ARROW) is not None
    bulk = entries_batch(SPEC, entries_of(ids, fields), ARROW)
    assert comparable(bulk) == comparable(one_by_one(ids, fields))
    assert bulk.num_rows == 500 and bulk.column(DEAD_LETTER).null_count == 500


def test_a_chunk_with_one_bad_entry_keeps_the_others_and_names_the_bad_one() -> None:
    ids = [f"{n + 1}-0".encode() for n in range(20)]
    fields = [good(n) for n in range(20)]
    fields[7][3] = b"yesterday"
    batch = entries_batch(SPEC, entries_of(ids, fields), ARROW)
    letters = batch.column(DEAD_LETTER).to_pylist()
    assert [i for i, d in enumerate(letters) if d] == [7]
    assert letters[7].startswith("8-0: field 'at'")
    assert batch.column("user").to_pylist()[6:9] == [6, None, 8]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_chunk_decodes_in_bulk_as_one_by_one(data: st.DataObject) -> None:
    count = data.draw(st.integers(1, 6))
    ids, fields = [], []
    for n in range(count):
        entry = good(n)
        for _ in range(data.draw(st.integers(0, 2))):  # a few odd values
            entry[data.draw(st.integers(0, 5)) * 2 + 1] = data.draw(st.sampled_from(ODD))
        shape = data.draw(st.sampled_from(["same", "missing", "extra", "reordered", "twice"]))
        if shape == "missing":
            entry = entry[2:]
        elif shape == "extra":
            entry = [*entry, b"more", b"x"]
        elif shape == "reordered":
            entry = entry[2:] + entry[:2]
        elif shape == "twice":
            entry = [*entry, b"user", b"3"]
        ms = data.draw(st.sampled_from([1, 1_700_000_000_123, 4_294_967_296_000]))
        ids.append(f"{ms}-{n}".encode())
        fields.append(entry)
    assert comparable(entries_batch(SPEC, entries_of(ids, fields), ARROW)) == \
        comparable(one_by_one(ids, fields))


def test_entries_of_one_layout_split_into_columns_byte_for_byte() -> None:
    values = [b"\xff\xfe", b"", b"a\r\nb", b"\x00$5*2"]
    entries = [[b"%d-0" % n, [b"n", b"%d" % n, b"v", value]] for n, value in enumerate(values)]
    columns = _columns(entries)
    assert columns is not None
    ids, fields = columns
    assert ids.to_pylist() == [b"0-0", b"1-0", b"2-0", b"3-0"] and list(fields) == [b"n", b"v"]
    assert fields[b"n"].to_pylist() == [b"0", b"1", b"2", b"3"]
    assert fields[b"v"].to_pylist() == values


@pytest.mark.parametrize("fields", [
    [[b"a", b"1"], [b"a", b"1", b"b", b"2"]],  # different numbers of fields
    [[b"a", b"1", b"b", b"2"], [b"b", b"2", b"a", b"1"]],  # another order
    [[b"a", b"1"], [b"b", b"1"]],  # other names
    [[b"a", b"1", b"a", b"2"], [b"a", b"1", b"a", b"2"]],  # a name twice
    [[b"a", b"1", b"b"], [b"a", b"1", b"b"]],  # a name without a value
])
def test_entries_of_other_layouts_are_not_split(fields: list[list[bytes]]) -> None:
    assert _columns(entries_of([b"1-0", b"2-0"], fields)) is None


def test_no_entries_are_no_rows_and_values_not_utf8_read_as_one_by_one_reads_them() -> None:
    assert entries_batch(SPEC, [], ARROW).num_rows == 0
    fields = [good(n) for n in range(3)]
    fields[1][9] = b"\xff\xfe"  # the string column ``name``
    batch = entries_batch(SPEC, entries_of([b"1-0", b"2-0", b"3-0"], fields), ARROW)
    assert comparable(batch) == comparable(one_by_one([b"1-0", b"2-0", b"3-0"], fields))
    assert batch.column("name").to_pylist() == ["u0", "\ufffd\ufffd", "u2"]
