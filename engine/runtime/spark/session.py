"""Builds the SparkSession a run executes on."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from engine.runtime.spark.class_archive import driver_java_options

CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)

# Settings the VSN stage depends on: speculation would let two attempts write one key
# group in the same epoch, and AQE could coalesce the exact instance partitions.
_REQUIRED_CONF = {
    "spark.speculation": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    # Batches to the Python workers bounded by rows only: with a byte bound (64 MB by
    # default) Spark measures the batch after every row it adds, which shows in profiles of
    # a keyed stage's epochs. Int.MaxValue turns it off.
    "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
    "spark.python.worker.reuse": "true",
    # JVM <-> Python worker traffic over Unix sockets: on TCP a task's last small write
    # waits for a delayed ACK, which an epoch pays per instance.
    "spark.python.unix.domain.socket.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.stopTimeout": "30s",
    # Sinks write from the executors: timestamps as Parquet micros (Arrow's unit), not INT96.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # A streaming query writes two log files per micro-batch (offsets, commits), and a
    # stateful one more per state partition. Hadoop without its native library (PySpark
    # ships none) sets a local file's permissions by running ``chmod``, and its FileContext
    # rename runs ``readlink`` several times: several processes spawned per file. Through
    # the FileSystem API it is one ``chmod`` per file and one per its ``.crc`` side file.
    # (The raw local file system, without side files, would spawn none, but Spark's RocksDB
    # state store needs the checksummed one.)
    "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILE_MANAGER,
}


def project_root() -> str:
    """The directory that holds the ``engine`` package."""
    # This file is <root>/engine/runtime/spark/session.py.
    return os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _export_project_path() -> None:
    # Python workers unpickle the VSN stage's functions by module name, so they need the
    # project on their path; local workers inherit this environment variable.
    root = project_root()
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])


def build_session(master: str = "local[2]", app_name: str = "streamscale",
                  java_options: str | None = None) -> SparkSession:
    """A SparkSession configured for the VSN runtime (speculation and AQE off, Arrow on).
    Its driver's JVM starts from the class archive when one is made (``java_options``
    replaces that)."""
    _export_project_path()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    conf = {**_REQUIRED_CONF, "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
            "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"],
            # Default, not extra, options: a user's spark.driver.extraJavaOptions still apply.
            "spark.driver.defaultJavaOptions":
                driver_java_options() if java_options is None else java_options}
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
