"""A streaming query's checkpoint files go through the FileSystem API on the raw local file
system: no process spawned per file beyond Hadoop's one ``chmod``, no ``.crc`` side files,
and an offset already logged is still never overwritten."""

from __future__ import annotations

import os
import time

import pytest

from engine.runtime.spark.session import CHECKPOINT_FILE_MANAGER, LOCAL_FILE_SYSTEM

pytestmark = pytest.mark.spark


def _manager(spark, path: str):  # type: ignore[no-untyped-def]
    jvm = spark.sparkContext._jvm
    factory = getattr(jvm.org.apache.spark.sql.execution.streaming.checkpointing,
                      "CheckpointFileManager$").__getattr__("MODULE$")
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    return factory.create(jvm.org.apache.hadoop.fs.Path(path), conf), jvm.org.apache.hadoop.fs.Path


def test_the_session_writes_checkpoints_through_the_raw_file_system(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    manager, path = _manager(spark, str(tmp_path))
    assert manager.getClass().getName() == CHECKPOINT_FILE_MANAGER
    jvm = spark.sparkContext._jvm
    local = jvm.org.apache.hadoop.fs.FileSystem.get(
        jvm.java.net.URI("file:///"), spark._jsparkSession.sessionState().newHadoopConf())
    assert local.getClass().getName() == LOCAL_FILE_SYSTEM

    out = manager.createAtomic(path(str(tmp_path / "0")), False)
    out.write(b"v1")
    out.close()
    # An existing log entry is not replaced: two queries on one checkpoint still collide.
    again = manager.createAtomic(path(str(tmp_path / "0")), False)
    again.write(b"other")
    with pytest.raises(Exception, match="already exists"):
        again.close()
    assert (tmp_path / "0").read_bytes() == b"v1"
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".crc")]


def test_a_query_logs_its_batches_without_side_files(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    checkpoint = tmp_path / "checkpoint"
    query = (
        spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 10).load()
        .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="10 milliseconds").start()
    )
    try:
        deadline = time.monotonic() + 60
        while len(query.recentProgress) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        progress = list(query.recentProgress)
    finally:
        query.stop()
    assert len(progress) >= 3
    offsets = sorted(os.listdir(checkpoint / "offsets"))
    commits = sorted(os.listdir(checkpoint / "commits"))
    assert {"0", "1", "2"} <= set(offsets) and {"0", "1", "2"} <= set(commits)
    assert not [n for n in offsets + commits if n.endswith(".crc") or n.startswith(".")]
