"""``source.redis_stream`` on Spark's Python Data Source streaming API.

The driver plans each micro-batch (epoch) as an offset range per stream; Spark writes the
range to the checkpoint's offset log before the epoch runs, so a replayed epoch reads the
same entries. Each stream's range is one input partition, read in a Python worker and
handed to Spark as Arrow record batches (no per-value conversion on Spark's side).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from engine.runtime.io.broker.redis_offsets import (
    advance,
    initial_offset,
    read_range,
    with_reconnect,
)
from engine.runtime.io.broker.spec import StreamSpec, decode_entry

FORMAT = "streamscale_redis_stream"
BATCH_ROWS = 10_000


def rows_to_batch(rows: Sequence[tuple[Any, ...]], schema: StructType) -> Any:
    """Decoded rows as one Arrow record batch of the source's schema (as Spark expects it:
    timestamps in microseconds, UTC)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(schema, timezone="UTC")
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(arrow)
    return pa.RecordBatch.from_arrays(
        [pa.array(list(values), type=field.type) for values, field in zip(columns, arrow,
                                                                            strict=True)],
        schema=arrow)


class StreamRange(InputPartition):
    """The entries of one stream that one epoch reads: ids in ``(after, until]``."""

    def __init__(self, stream: str, after: str, until: str) -> None:
        super().__init__((stream, after, until))
        self.stream, self.after, self.until = stream, after, until


class RedisStreamDataSource(DataSource):
    """The data source; options ``spec`` (a ``StreamSpec`` as JSON) and ``url``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return StreamSpec.from_json(self.options["spec"], "").ddl()

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return RedisStreamReader(StreamSpec.from_json(self.options["spec"], self.options["url"]),
                                 schema)


class RedisStreamReader(DataSourceStreamReader):
    """Offsets from the driver, entries read and decoded in the workers."""

    def __init__(self, spec: StreamSpec, schema: StructType) -> None:
        self.spec = spec
        self.schema = schema

    def initialOffset(self) -> dict:
        return with_reconnect(self.spec, "finding the start offsets",
                              lambda c: initial_offset(c, self.spec))

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.spec.max_entries)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        cap = None if isinstance(limit, ReadAllAvailable) else _cap_of(limit, self.spec)
        return with_reconnect(self.spec, "planning an epoch",
                              lambda c: advance(c, self.spec, start, cap))

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        ranges = []
        for stream in self.spec.streams:
            after = (start["streams"].get(stream) or {"id": "0-0"})["id"]
            until = end["streams"][stream]["id"]
            if after != until:
                ranges.append(StreamRange(stream, after, until))
        return ranges

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, StreamRange)
        entries = with_reconnect(
            self.spec, f"reading stream {partition.stream!r}",
            lambda c: list(read_range(c, partition.stream, partition.after, partition.until)),
        )
        rows = [decode_entry(self.spec, entry_id, fields) for entry_id, fields in entries]
        for first in range(0, len(rows), BATCH_ROWS):
            yield rows_to_batch(rows[first:first + BATCH_ROWS], self.schema)

    def commit(self, end: dict) -> None:
        """Nothing to acknowledge: the stream keeps its entries (no consumer group)."""


def _cap_of(limit: ReadLimit, spec: StreamSpec) -> int:
    if isinstance(limit, ReadMaxRows):
        return max(1, int(limit.max_rows))
    return spec.max_entries


def read_redis_stream(spark: SparkSession, op_id: str, params: dict[str, Any]) -> DataFrame:
    """The streaming DataFrame of one ``source.redis_stream`` operator."""
    spark.dataSource.register(RedisStreamDataSource)
    spec = StreamSpec.from_params(op_id, params)
    return (spark.readStream.format(FORMAT).option("spec", spec.to_json())
            .option("url", spec.url).load())
