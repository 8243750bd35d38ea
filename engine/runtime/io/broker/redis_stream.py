"""``source.redis_stream``: the entries an epoch reads, fixed in its plan, read as a batch.

The driver plans each epoch's entries as an offset range per stream (``take_entries``): the
range is logged with the epoch's plan before the epoch runs, so a replayed epoch reads the
same entries. Each stream's range is one partition, read in a Python worker and handed to
Spark as Arrow record batches (no per-value conversion on Spark's side).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from engine.runtime.io.broker.columnar import entries_batch
from engine.runtime.io.broker.redis_offsets import (
    READ_CHUNK,
    advance,
    initial_offset,
    read_chunk,
    with_reconnect,
)
from engine.runtime.io.broker.spec import StreamSpec
from engine.runtime.io.taken import EntriesTaken


def take_entries(spec: StreamSpec, previous: EntriesTaken | None) -> EntriesTaken:
    """The entries the next epoch reads: from where the previous epoch ended (a new run:
    the source's ``start``) up to every new entry, at most ``max_entries_per_epoch`` in all."""
    if previous is None:
        start = with_reconnect(spec, "finding the start offsets",
                               lambda c: initial_offset(c, spec))
    else:
        start = previous.end
    end = with_reconnect(spec, "planning an epoch",
                         lambda c: advance(c, spec, start, spec.max_entries))
    return EntriesTaken(start, end)


def stream_rows(spark: SparkSession, spec: StreamSpec, taken: EntriesTaken) -> DataFrame:
    """The rows of an epoch's entries: one partition per stream with entries to read."""
    schema = _schema(spec)
    ranges = [(stream, taken.start["streams"].get(stream, {"id": "0-0"})["id"], end["id"])
              for stream, end in taken.end["streams"].items()]
    ranges = [r for r in ranges if r[1] != r[2]]
    if not ranges:
        return spark.createDataFrame([], schema)
    reader = partial(_read_ranges, spec, tuple(ranges), schema)
    return spark.range(0, len(ranges), 1, len(ranges)).mapInArrow(reader, schema)


def _read_ranges(spec: StreamSpec, ranges: Sequence[tuple[str, str, str]], schema: StructType,
                 batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: the entries of the ranges whose index this partition holds, one
    record batch per chunk read."""
    arrow = to_arrow_schema(schema, timezone="UTC")  # as Spark expects it: micros, UTC
    for batch in batches:
        for index in batch.column(0).to_pylist():
            stream, cursor, until = ranges[index]
            while True:
                entries = with_reconnect(spec, f"reading stream {stream!r}", partial(
                    read_chunk, stream=stream, after=cursor, until=until))
                if entries:
                    yield entries_batch(spec, [e[0] for e in entries], [e[1] for e in entries],
                                        arrow)
                if len(entries) < READ_CHUNK:
                    break
                cursor = entries[-1][0].decode()


def _schema(spec: StreamSpec) -> StructType:
    schema = StructType.fromDDL(spec.ddl())
    assert isinstance(schema, StructType)
    return schema
