"""Sinks that commit each epoch exactly once: a replayed epoch is recognised and skipped.

- memory: a process-wide registry ``name -> {epoch: Arrow table}``.
- files: the epoch is written under a temporary name, then renamed to ``epoch=<id>``.
- postgres: rows and a (sink, epoch) commit record go in one transaction.
- noop: the rows are computed and discarded (benchmarks, dry runs).
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from engine.runtime.errors import UnsupportedJobError
from engine.runtime.io.data_access import resolve_data_path
from engine.runtime.spark.frames import Frame, to_arrow

_MEMORY: dict[str, dict[int, pa.Table]] = {}
_MEMORY_LOCK = threading.Lock()


class Sink(ABC):
    """Writes one epoch's rows; ``write_epoch`` returns rows written (0 when skipped)."""

    @abstractmethod
    def write_epoch(self, df: Frame, epoch: int) -> int:
        """Commits ``df`` as epoch ``epoch`` unless that epoch is already committed."""


class MemorySink(Sink):
    """Keeps each epoch's rows in memory under ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def write_epoch(self, df: Frame, epoch: int) -> int:
        """Stores the epoch's rows as an Arrow table."""
        with _MEMORY_LOCK:
            if epoch in _MEMORY.setdefault(self.name, {}):
                return 0
        table = to_arrow(df)
        with _MEMORY_LOCK:
            _MEMORY[self.name].setdefault(epoch, table)
        return table.num_rows


def memory_sink_rows(name: str) -> pa.Table | None:
    """Every committed row of the memory sink ``name``, in epoch order."""
    epochs = memory_sink_epochs(name)
    if not epochs:
        return None
    return pa.concat_tables([epochs[e] for e in sorted(epochs)], promote_options="default")


def memory_sink_epochs(name: str) -> dict[int, pa.Table]:
    """The rows of the memory sink ``name`` by the epoch that committed them."""
    with _MEMORY_LOCK:
        return dict(_MEMORY.get(name) or {})


def clear_memory_sink(name: str) -> None:
    """Forgets a memory sink (tests)."""
    with _MEMORY_LOCK:
        _MEMORY.pop(name, None)


class FilesSink(Sink):
    """One directory per epoch, ``<path>/epoch=<id>``, made visible by an atomic rename."""

    def __init__(self, path: str, fmt: str) -> None:
        if fmt not in ("json", "csv", "parquet"):
            raise UnsupportedJobError(f"sink.files: unknown format {fmt!r}")
        self.path = path
        self.fmt = fmt

    def write_epoch(self, df: Frame, epoch: int) -> int:
        """Writes to ``_tmp/`` (ignored by readers) and renames it into place."""
        final = os.path.join(self.path, f"epoch={epoch}")
        if os.path.exists(final):
            return 0
        staging = os.path.join(self.path, "_tmp", f"epoch={epoch}-{uuid.uuid4().hex}")
        rows = self._write(df, staging)
        os.rename(staging, final)
        shutil.rmtree(os.path.join(self.path, "_tmp"), ignore_errors=True)
        return rows

    def _write(self, frame: Frame, staging: str) -> int:
        if isinstance(frame, pa.Table) and self.fmt in ("parquet", "csv"):
            # Rows already local (a keyed stage that emitted none) are written without a Spark job.
            os.makedirs(staging)
            target = os.path.join(staging, "part-00000." + self.fmt)
            if self.fmt == "parquet":
                pq.write_table(frame, target)
            else:
                pacsv.write_csv(frame, target)
            return frame.num_rows
        df = frame if isinstance(frame, DataFrame) else SparkSession.active().createDataFrame(frame)
        writer = df.write.format(self.fmt).mode("overwrite")
        if self.fmt == "csv":
            writer = writer.option("header", "true")
        writer.save(staging)
        return -1  # row count unknown without a second pass


class NoopSink(Sink):
    """Computes each epoch's rows and discards them, as Spark's ``noop`` format does (a
    benchmark's sink: the rows are made, nothing is kept, so a replay has nothing to skip)."""

    def write_epoch(self, df: Frame, epoch: int) -> int:
        if isinstance(df, pa.Table):  # rows made without a Spark job (none, or collected)
            return df.num_rows
        df.write.format("noop").mode("overwrite").save()
        return -1  # row count unknown without a second pass


def build_sink(op_type: str, op_id: str, params: Mapping[str, Any], run_id: str) -> Sink:
    """The sink for a sink operator of the job graph."""
    if op_type == "sink.memory":
        return MemorySink(str(params.get("name") or op_id))
    if op_type == "sink.files":
        return FilesSink(resolve_data_path(str(params["path"])),
                         str(params.get("format", "parquet")))
    if op_type == "sink.noop":
        return NoopSink()
    if op_type == "sink.postgres":
        from engine.runtime.io.postgres_sink import PostgresSink

        return PostgresSink(str(params["table"]), run_id, f"{run_id}/{op_id}")
    raise UnsupportedJobError(f"sink type {op_type!r} is not supported by the Spark runtime")
