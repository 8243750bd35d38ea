"""Spark's built-in streaming aggregation on the benchmark workload (the baseline)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from bench.workload import KEYS, WATERMARK, WINDOW
from engine.runtime.io.sources import GeneratorSpec, generator_columns

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


@contextmanager
def builtin_checkpoint(prefix: str) -> Iterator[str]:
    """A scratch checkpoint folder for Spark's own queries, removed afterwards. Spark's
    state store maintenance can still write a snapshot into it just after its query stopped
    (a removal then failed with "Directory not empty"), so the removal is tried again."""
    folder = tempfile.mkdtemp(prefix=prefix)
    try:
        yield folder
    finally:
        for attempt in range(10):
            try:
                shutil.rmtree(folder)
                break
            except FileNotFoundError:
                break
            except OSError:
                if attempt == 9:
                    raise
                time.sleep(0.5)


def use_rocksdb(spark: SparkSession, enabled: bool) -> None:
    """Switches the state store of queries started next (the offline repartition of
    Spark 4.2+ supports only RocksDB, with changelog checkpointing as recommended)."""
    if enabled:
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
        spark.conf.set(
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true"
        )
    else:
        spark.conf.unset("spark.sql.streaming.stateStore.providerClass")
        spark.conf.unset("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled")


def read_generator(spark: SparkSession, spec: GeneratorSpec, rows_per_batch: int) -> DataFrame:
    """The generator's events as Spark's own streaming source, ``rows_per_batch`` rows per
    batch (runs plan their rows per epoch instead, ``engine.runtime.io.sources``)."""
    raw = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows_per_batch)
        .option("numPartitions", spark.sparkContext.defaultParallelism)
        .option("startTimestamp", spec.start_ms)
        .load()
    )
    return raw.select(*generator_columns(spec))


def start_builtin(
    spark: SparkSession,
    rows_per_batch: int,
    checkpoint: str,
    start_ms: int,
    keys: int = KEYS,
    trigger: str = "0 seconds",
    window: str = WINDOW,
) -> StreamingQuery:
    """The same events, windowed count with watermark, append mode, noop sink."""
    spec = GeneratorSpec.from_params({"rows_per_second": rows_per_batch, "keys": keys}, start_ms)
    counts = (
        read_generator(spark, spec, rows_per_batch)
        .withWatermark("event_time", WATERMARK)
        .groupBy(F.window("event_time", window), F.col("campaign_id"))
        .count()
    )
    return (
        counts.writeStream.outputMode("append")
        .format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=trigger)
        .start()
    )


def run_builtin(
    spark: SparkSession, rows_per_batch: int, epochs: int, checkpoint: str, start_ms: int
) -> list[dict[str, Any]]:
    """Runs ``epochs`` micro-batches and returns their progress reports."""
    query = start_builtin(spark, rows_per_batch, checkpoint, start_ms)
    seen: dict[int, dict[str, Any]] = {}
    while len(seen) < epochs:
        for progress in query.recentProgress:
            seen[progress["batchId"]] = progress
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        time.sleep(0.1)
    query.stop()
    return [seen[b] for b in sorted(seen)][:epochs]


def progress_ms(progress: dict[str, Any]) -> float:
    """Wall time of one micro-batch."""
    return float(progress["durationMs"]["triggerExecution"])
