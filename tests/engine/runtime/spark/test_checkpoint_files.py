"""A streaming query's checkpoint files go through the FileSystem API (no ``readlink``
processes spawned per file by a FileContext rename), an offset already logged is still never
overwritten, and Spark's RocksDB state store still commits on that file system."""

from __future__ import annotations

import os
import time

import pytest
from pyspark.sql import functions as F

from engine.runtime.spark.session import CHECKPOINT_FILE_MANAGER

pytestmark = pytest.mark.spark

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def _manager(spark, path: str):  # type: ignore[no-untyped-def]
    jvm = spark.sparkContext._jvm
    factory = getattr(jvm.org.apache.spark.sql.execution.streaming.checkpointing,
                      "CheckpointFileManager$").__getattr__("MODULE$")
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    return factory.create(jvm.org.apache.hadoop.fs.Path(path), conf), jvm.org.apache.hadoop.fs.Path


def test_the_session_writes_checkpoints_through_the_file_system_api(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    manager, path = _manager(spark, str(tmp_path))
    assert manager.getClass().getName() == CHECKPOINT_FILE_MANAGER

    out = manager.createAtomic(path(str(tmp_path / "0")), False)
    out.write(b"v1")
    out.close()
    # An existing log entry is not replaced: two queries on one checkpoint still collide.
    again = manager.createAtomic(path(str(tmp_path / "0")), False)
    again.write(b"other")
    with pytest.raises(Exception, match="already exists"):
        again.close()
    assert (tmp_path / "0").read_bytes() == b"v1"


def test_a_stateful_query_on_rocksdb_logs_and_commits_its_batches(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    checkpoint = tmp_path / "checkpoint"
    provider = "spark.sql.streaming.stateStore.providerClass"
    before = spark.conf.get(provider, None)
    spark.conf.set(provider, ROCKSDB)
    query = (
        spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 10).load()
        .groupBy((F.col("value") % 5).alias("k")).count()
        .writeStream.format("noop").outputMode("update")
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="10 milliseconds").start()
    )
    try:
        deadline = time.monotonic() + 60
        while len(query.recentProgress) < 3 and query.isActive and time.monotonic() < deadline:
            time.sleep(0.05)
        progress = list(query.recentProgress)
        failure = query.exception()
    finally:
        query.stop()
        if before is None:
            spark.conf.unset(provider)
        else:
            spark.conf.set(provider, before)
    assert failure is None, failure
    assert len(progress) >= 3
    assert progress[-1]["stateOperators"][0]["numRowsTotal"] == 5
    offsets = set(os.listdir(checkpoint / "offsets"))
    commits = set(os.listdir(checkpoint / "commits"))
    assert {"0", "1", "2"} <= offsets and {"0", "1", "2"} <= commits
    for log in (offsets, commits):
        # Every logged batch was renamed into place (no temp file left beside it). A stop
        # that interrupts the next batch's write may leave that one batch's temp file,
        # which Spark's log ignores: at most one, for the batch after the last logged.
        logged = {int(n) for n in log if n.isdigit()}
        temps = [n for n in log if n.endswith(".tmp")]
        batches = [int(n.split(".")[1]) for n in temps]
        assert not [b for b in batches if b in logged], temps
        assert set(batches) <= {max(logged) + 1}, temps
