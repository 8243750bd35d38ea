"""The epoch clock: one row per micro-batch, the stream that runs the epochs of a job that
reads sources through Spark as well as clock sources (the generator and ``source.rate``,
whose rows are planned per epoch: ``engine.runtime.io.sources``). It ticks at every batch
Spark runs, as Spark's ``rate-micro-batch`` source did; Spark's trigger paces the run. A job
whose sources are all clock sources runs without it, from the driver's own epoch loop
(``engine.runtime.driver.loop``).
"""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader
from pyspark.sql.types import StructType

FORMAT = "streamscale_epoch_clock"


class EpochClock(DataSource):
    """A tick per micro-batch."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return "tick long"

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        return ClockReader()


class ClockReader(SimpleDataSourceStreamReader):
    """Offsets ``{"tick": n}``; a tick is one epoch's row."""

    def initialOffset(self) -> dict:
        return {"tick": 0}

    def read(self, start: dict) -> tuple[Iterator[tuple], dict]:
        tick = int(start.get("tick", 0))  # a checkpoint of an older clock has no tick
        return iter([(tick + 1,)]), {"tick": tick + 1}

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[tuple]:
        return iter([(int(end.get("tick", 0)),)])

    def commit(self, end: dict) -> None:
        """Nothing to release."""


def read_epoch_clock(spark: SparkSession) -> DataFrame:
    """The clock as a stream of one ``__tick`` column."""
    spark.dataSource.register(EpochClock)
    return spark.readStream.format(FORMAT).load().withColumnRenamed("tick", "__tick")
