"""The rows of a broker source's planned ranges, kept in the driver between the plan and the
epoch, and the next range read ahead on a thread while an epoch runs.

A source that is behind (its epoch took its whole cap) will take the next cap's worth right
after: reading it while the epoch before runs takes the read off the epochs' path, the
broker's and the decoding's work overlapping Spark's; the rows are handed to Spark there too
(building the DataFrame converts them in the JVM). What was read ahead is used only if the
next plan takes exactly that range; otherwise it is dropped and the plan's range read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StructField, StructType

from engine.runtime.io.broker.spec import DEAD_LETTER, StreamSpec


@dataclass(frozen=True)
class RangeRows:
    """A planned range (a source's take) and the rows of its entries."""

    taken: Any
    rows: pa.Table
    frame: DataFrame | None = None
    """The rows as a DataFrame, when they were handed to Spark ahead too."""


@dataclass(frozen=True)
class BrokerRows:
    """An epoch's rows of a broker source as Spark reads them (the entries that fit the
    schema), with what the driver counted of the rows it decoded: every entry, and the dead
    letters (``{"count", "sample"}``, the first by entry id), so Spark observes nothing."""

    frame: DataFrame
    entries: int
    dead_letters: dict[str, Any]

    @classmethod
    def of(cls, frame: DataFrame, rows: pa.Table) -> BrokerRows:
        letters = rows[DEAD_LETTER]
        return cls(frame, rows.num_rows, {"count": len(letters) - letters.null_count,
                                          "sample": pc.min(letters).as_py()})


class ReadAhead:
    """Per source (by key): the rows of the range it planned last, and its next range's,
    read ahead."""

    def __init__(self, thread_name: str) -> None:
        self._lock = threading.Lock()
        self._planned: dict[Hashable, RangeRows] = {}
        self._ahead: dict[Hashable, Future[RangeRows]] = {}
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name)

    def ahead(self, source: Hashable) -> RangeRows | None:
        """The range read ahead for ``source`` (once), None if none was or its read failed
        (the plan's read reports the error)."""
        with self._lock:
            future = self._ahead.pop(source, None)
        if future is None:
            return None
        try:
            return future.result()
        except Exception:  # noqa: BLE001 - read again on the epoch's path, which reports it
            return None

    def read_ahead(self, source: Hashable, read: Callable[[], RangeRows]) -> None:
        """Starts reading ``source``'s next range."""
        future = self._reader.submit(read)
        with self._lock:
            self._ahead[source] = future

    def keep(self, source: Hashable, planned: RangeRows) -> None:
        """``source``'s planned range, its rows read, for the epoch that runs it."""
        with self._lock:
            self._planned[source] = planned

    def frame(self, spark: SparkSession, source: Hashable, taken: Any, schema: StructType,
              read: Callable[[], pa.Table]) -> BrokerRows:
        """The rows of ``taken``: as handed to Spark ahead, else from the rows kept for
        ``source``'s last plan, else from ``read()``."""
        planned = self.planned(source, taken)
        if planned is not None and planned.frame is not None:
            return BrokerRows.of(planned.frame, planned.rows)
        rows = planned.rows if planned is not None else read()
        return BrokerRows.of(rows_frame(spark, schema, rows), rows)

    def planned(self, source: Hashable, taken: Any) -> RangeRows | None:
        """``taken`` and its rows if they were read for ``source``'s last plan."""
        with self._lock:
            planned = self._planned.get(source)
        return planned if planned is not None and planned.taken == taken else None


def range_rows(taken: Any, rows: pa.Table, spark: SparkSession | None,
               schema: Callable[[], StructType]) -> RangeRows:
    """``taken`` and its rows, handed to ``spark`` if given (on the read-ahead thread)."""
    return RangeRows(taken, rows, None if spark is None else rows_frame(spark, schema(), rows))


def spark_schema(spec: StreamSpec) -> StructType:
    """The schema of the rows Spark takes (``StreamSpec.ddl``, the dead letters left out)."""
    schema = StructType.fromDDL(spec.ddl())
    assert isinstance(schema, StructType)
    return StructType([f for f in schema.fields if f.name != DEAD_LETTER])


def rows_frame(spark: SparkSession, schema: StructType, rows: pa.Table) -> DataFrame:
    """Decoded rows but the dead letters as a DataFrame of ``schema``. They reach the JVM as
    one array of structs per task, unpacked there: as rows of their own, every row is an
    element of the plan that Spark's analyzer walks, and that the task's closure serializes,
    one by one."""
    letters = rows[DEAD_LETTER]
    if letters.null_count != len(letters):
        rows = rows.filter(pc.is_null(letters))
    rows = rows.drop_columns([DEAD_LETTER])
    if not rows.num_rows:
        return spark.createDataFrame([], schema)
    step = -(-rows.num_rows // spark.sparkContext.defaultParallelism)
    offsets = pa.array([*range(0, rows.num_rows, step), rows.num_rows], pa.int32())
    packed = pa.ListArray.from_arrays(offsets, rows.to_struct_array().combine_chunks())
    arrays = StructType([StructField("rows", ArrayType(schema, False), False)])
    return spark.createDataFrame(pa.table({"rows": packed}), arrays).select(F.inline("rows"))
