"""The epoch clock: the stream of one row per micro-batch that runs the epochs of a job whose
rows are planned per epoch (the generator and ``source.rate``, ``engine.runtime.io.sources``).

An epoch starts when the run's interval has passed since the last one started, as with
Spark's processing-time trigger (but an epoch due while the last one still ran starts as soon
as it ends, where Spark would wait for the following interval), or at once when the driver
wakes the clock: a control command arrived, so the change it asks for takes effect in an
epoch that starts now rather than at the next interval. Spark polls the clock every
``POLL_MS`` (a clock that is not due answers with no new offset, and Spark then runs no
batch); the driver wakes it by rewriting a small file, the only thing the driver and the
clock's own Python process share.

Without an interval (epochs back to back, or a stream that also reads sources Spark paces
itself) the clock ticks at every batch Spark runs, as Spark's ``rate-micro-batch`` source did.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader
from pyspark.sql.types import StructType

FORMAT = "streamscale_epoch_clock"
POLL_MS = 20
"""How often Spark asks a paced clock whether the next epoch is due (the most a wake waits)."""


class EpochClock(DataSource):
    """Options: ``interval_ms`` (0: a tick per batch) and ``wake`` (the wake file's path)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return "tick long"

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        return ClockReader(int(self.options.get("interval_ms", "0")),
                           self.options.get("wake", ""))


class ClockReader(SimpleDataSourceStreamReader):
    """Offsets ``{"tick": n}``; a tick is one epoch's row."""

    def __init__(self, interval_ms: int, wake: str) -> None:
        self.interval_s = interval_ms / 1000.0
        self.wake = wake
        self._due = 0.0  # monotonic time the next epoch is due; 0: at once
        self._anchor: float | None = None  # when the first epoch started
        self._woken = read_wake(wake)

    def initialOffset(self) -> dict:
        return {"tick": 0}

    def read(self, start: dict) -> tuple[Iterator[tuple], dict]:
        tick = int(start.get("tick", 0))  # a checkpoint of an older clock has no tick
        if not self._ticks_now():
            return iter(()), start
        return iter([(tick + 1,)]), {"tick": tick + 1}

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[tuple]:
        return iter([(int(end.get("tick", 0)),)])

    def commit(self, end: dict) -> None:
        """Nothing to release."""

    def _ticks_now(self) -> bool:
        if self.interval_s <= 0:
            return True
        now = time.monotonic()
        woken = read_wake(self.wake)
        if now >= self._due:
            # Epochs start on a grid of intervals from the first; one that ran past the next
            # start is followed at once (a run behind loses no time waiting), the one after
            # that starts on the grid again.
            if self._anchor is None:
                self._anchor = now
            self._due = now + self.interval_s - (now - self._anchor) % self.interval_s
            self._woken = woken
            return True
        if woken != self._woken:
            self._woken = woken
            return True
        return False


def read_wake(path: str) -> str:
    """The wake file's content ('' if there is none yet)."""
    if not path:
        return ""
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except OSError:
        return ""


class Waker:
    """The driver's side: each ``wake`` starts the next epoch at once."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._count = 0

    def wake(self) -> None:
        self._count += 1
        partial = f"{self.path}.{os.getpid()}"
        with open(partial, "w", encoding="ascii") as f:
            f.write(f"{os.getpid()}:{self._count}")
        os.replace(partial, self.path)


def read_epoch_clock(spark: SparkSession, *, interval_ms: int = 0, wake: str = "") -> DataFrame:
    """The clock as a stream of one ``__tick`` column."""
    spark.dataSource.register(EpochClock)
    return (spark.readStream.format(FORMAT).option("interval_ms", str(interval_ms))
            .option("wake", wake).load().withColumnRenamed("tick", "__tick"))
