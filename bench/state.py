"""``python -m bench state``: epoch time as keyed state grows from ~100k to >= 10M keys.

The same input per measured epoch (``rows_per_batch`` rows, keys uniform over the key
space) into a one-hour window count, so no window closes and the state only grows. The
state is filled first with larger epochs of the same job (each key of the key space once),
then the measured epochs run on that state. Every engine reads the same Parquet files
(one file per epoch), in the same session, after a run that warms the session up:

- VSN on the embedded store (SQLite under the checkpoint), small and large state;
- VSN on the Redis store as a standalone-cluster run uses it (the product's state Redis);
- Spark's built-in aggregation with the RocksDB store on the large state (the peer);
- dedupe and join instances on the embedded store, without Spark (``bench.state_lookups``).

An epoch's time is Spark's ``triggerExecution`` of its micro-batch (what a user waits for:
the whole epoch, offset and commit logs included), the median over the measured epochs. The
four VSN runs are made ``rounds`` times, small and large state alternating, and each VSN
figure is the median over all its rounds' measured epochs: single epochs on a shared 2-core
machine vary by tens of percent, and slow spells last longer than a run.
The driver's memory is the resident set of this (the driver's) Python process, sampled
throughout; the JVM, which in local mode is also the executor, is left out.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench.builtin import builtin_checkpoint, progress_ms, use_rocksdb
from bench.state_lookups import measure_lookups
from bench.workload import window_count_job
from engine.runtime.api import start_run
from engine.runtime.driver.metrics import CollectingPublisher
from engine.runtime.io.data_access import data_root
from engine.runtime.spark.session import build_session
from engine.runtime.state import open_store

WINDOW = "1 hour"
WATERMARK = "10 minutes"
T0_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z: every event falls in one window
SCHEMA = {"campaign_id": "bigint", "event_time": "timestamp"}
WARMUP = 2


@dataclass(frozen=True)
class Input:
    """A directory of one Parquet file per epoch: ``fill`` epochs, then ``measured``."""

    path: str
    keys: int
    fill: int
    measured: int

    @property
    def epochs(self) -> int:
        return self.fill + WARMUP + self.measured


def write_input(
    path: str, keys: int, rows_per_batch: int, fill_rows: int, measured: int, seed: int
) -> Input:
    """Fill files hold every key once (shuffled, ``fill_rows`` per file); then
    ``WARMUP + measured`` files of ``rows_per_batch`` keys uniform over the key space.
    Modification times follow the order, which the file source reads them in."""
    os.makedirs(path)
    rng = np.random.default_rng(seed)
    order = rng.permutation(keys)
    batches = [order[i : i + fill_rows] for i in range(0, keys, fill_rows)]
    fill = len(batches)
    batches += [rng.integers(0, keys, rows_per_batch) for _ in range(WARMUP + measured)]
    stamp = time.time() - len(batches) - 10
    for i, ids in enumerate(batches):
        micros = np.full(len(ids), T0_US + (i + 1) * 1_000_000, dtype=np.int64)
        table = pa.table(
            {
                "campaign_id": pa.array(ids, pa.int64()),
                "event_time": pa.array(micros, pa.timestamp("us", tz="UTC")),
            }
        )
        target = os.path.join(path, f"part-{i:04d}.parquet")
        pq.write_table(table, target)
        os.utime(target, (stamp + i, stamp + i))
    return Input(path, keys, fill, measured)


def state_job(source: Input, parallelism: int) -> dict[str, Any]:
    """files -> window_aggregate(count per campaign, one hour) -> memory sink."""
    files = {
        "id": "events",
        "type": "source.files",
        "params": {
            "path": os.path.relpath(source.path, data_root()),
            "format": "parquet",
            "schema": SCHEMA,
            "max_files_per_trigger": 1,
        },
    }
    return window_count_job(
        files, parallelism, "bench_state", name="bench-state", window=WINDOW, watermark=WATERMARK
    )


def run_vsn(
    spark: SparkSession, source: Input, label: str, state_url: str | None = None
) -> list[float]:
    """One VSN run over ``source``; the measured epochs' times in ms."""
    publisher = CollectingPublisher()
    with tempfile.TemporaryDirectory(prefix="bench-state-") as checkpoint:
        run = start_run(
            state_job(source, 2),
            checkpoint=checkpoint,
            publisher=publisher,
            spark=spark,
            trigger_ms=0,
            state_url=state_url,
            stop_after_epoch=source.epochs - 1,
        )

        def batches() -> list[int]:
            failure = run.failure()
            if failure is not None:
                raise RuntimeError(f"{label}: the run failed: {failure}")
            return [p["batchId"] for p in run.progress()]

        _follow(label, batches, source.epochs)
        run.wait()
        progress = run.progress()
        if run.store.kind == "redis":
            open_store(run.store).clear()
    return _measured(label, source, progress)


def run_builtin(spark: SparkSession, source: Input, label: str) -> list[float]:
    """Spark's own windowed count with the RocksDB store over ``source``."""
    use_rocksdb(spark, True)
    try:
        with builtin_checkpoint("bench-state-spark-") as checkpoint:
            schema = ", ".join(f"{name} {kind}" for name, kind in SCHEMA.items())
            counts = (
                spark.readStream.format("parquet")
                .schema(schema)
                .option("maxFilesPerTrigger", 1)
                .load(source.path)
                .withWatermark("event_time", WATERMARK)
                .groupBy(F.window("event_time", WINDOW), F.col("campaign_id"))
                .count()
            )
            query = (
                counts.writeStream.outputMode("append")
                .format("noop")
                .option("checkpointLocation", checkpoint)
                .trigger(processingTime="0 seconds")
                .start()
            )
            seen: dict[int, dict[str, Any]] = {}

            def batches() -> list[int]:
                if query.exception() is not None:
                    raise RuntimeError(str(query.exception()))
                for p in query.recentProgress:
                    seen[p["batchId"]] = p
                return list(seen)

            _follow(label, batches, source.epochs)
            query.stop()
    finally:
        use_rocksdb(spark, False)
    return _measured(label, source, [seen[b] for b in sorted(seen)])


def _follow(label: str, batches: Any, epochs: int) -> None:
    """Prints a progress line as epochs complete, until ``epochs`` are done."""
    done = 0
    while done < epochs:
        time.sleep(0.5)
        now = len(set(batches()))
        if now != done:
            done = now
            _progress(f"{label}: {done}/{epochs} epochs")


def _measured(label: str, source: Input, progress: list[dict[str, Any]]) -> list[float]:
    first = source.fill + WARMUP
    times = [progress_ms(p) for p in progress if first <= p["batchId"] < source.epochs]
    fill = [progress_ms(p) for p in progress if p["batchId"] < source.fill]
    _progress(
        f"{label}: fill epochs ms {[round(t) for t in fill]}, "
        f"measured ms {[round(t) for t in times]}"
    )
    return times


class RssSampler:
    """The driver process's resident set, sampled every 0.2 s in a thread."""

    def __init__(self) -> None:
        self._process = psutil.Process()
        self.start_mb = self._mb()
        self.max_mb = self.start_mb
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _mb(self) -> float:
        return self._process.memory_info().rss / 2**20

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            self.max_mb = max(self.max_mb, self._mb())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def product_redis_url() -> str:
    """The Redis a standalone-cluster run keeps its state in: the product's
    ``STATE_REDIS_URL``, else its embedded state Redis (fsync on every write, started if
    needed), as ``webapp.settings`` resolves it for a cluster run."""
    from webapp import embedded
    from webapp.config import load_config

    config = load_config()
    return config.state_redis_url or embedded.ensure_state_redis(var_dir=config.var_dir)


def measure(
    rows_per_batch: int = 200_000,
    large_keys: int = 10_000_000,
    small_keys: int = 100_000,
    fill_rows: int = 2_000_000,
    measured: int = 9,
    rounds: int = 2,
) -> dict[str, Any]:
    """Runs the measurements in one session (the VSN ones ``rounds`` times); returns the
    figures."""
    began = time.monotonic()
    redis_url = product_redis_url()
    spark = build_session(app_name="bench-state")
    # A job reads files inside the data folder only, so the input is written there.
    with tempfile.TemporaryDirectory(prefix="bench-state-input-", dir=data_root()) as data:
        small = write_input(
            str(Path(data) / "small"), small_keys, rows_per_batch, fill_rows, measured, 1
        )
        large = write_input(
            str(Path(data) / "large"), large_keys, rows_per_batch, fill_rows, measured, 2
        )
        _progress(f"input written: {small.epochs} and {large.epochs} epochs")
        rss = RssSampler()
        # The session's first run also warms the JVM and the Python workers up, which its
        # warm-up epochs do not cover: not measured, so no store's figures carry it.
        run_vsn(spark, small, "session warm-up (not measured)")
        vsn_small: list[float] = []
        vsn_large: list[float] = []
        redis_small: list[float] = []
        redis_large: list[float] = []
        # Rounds of the four VSN runs, small and large state alternating: a slow spell of
        # the shared machine falls on both sizes, not on the one measured during it.
        for round_ in range(1, rounds + 1):
            tag = f" (round {round_}/{rounds})"
            vsn_small += run_vsn(spark, small, "vsn small" + tag)
            vsn_large += run_vsn(spark, large, "vsn large" + tag)
            redis_small += run_vsn(spark, small, "redis small" + tag, redis_url)
            redis_large += run_vsn(spark, large, "redis large" + tag, redis_url)
        spark_large = run_builtin(spark, large, "spark rocksdb large")
        rss.stop()
    ms = {
        name: statistics.median(v)
        for name, v in [
            ("vsn_small", vsn_small),
            ("vsn_large", vsn_large),
            ("redis_small", redis_small),
            ("redis_large", redis_large),
            ("spark_large", spark_large),
        ]
    }
    lookups = measure_lookups(small_keys, large_keys)
    _progress(f"bench took {time.monotonic() - began:.0f} s")
    return {
        "keys_small": small_keys,
        "keys_large": large_keys,
        "rows_per_batch": rows_per_batch,
        "epochs_measured": measured,
        "vsn_rounds": rounds,
        "vsn_epoch_ms_small": round(ms["vsn_small"], 1),
        "vsn_epoch_ms_large": round(ms["vsn_large"], 1),
        "vsn_growth": round(ms["vsn_large"] / ms["vsn_small"], 3),
        "redis_epoch_ms_small": round(ms["redis_small"], 1),
        "redis_epoch_ms_large": round(ms["redis_large"], 1),
        "redis_growth": round(ms["redis_large"] / ms["redis_small"], 3),
        "spark_epoch_ms_large": round(ms["spark_large"], 1),
        "ratio_large": round(ms["spark_large"] / ms["vsn_large"], 3),
        **lookups,
        "driver_rss_mb_start": round(rss.start_mb),
        "driver_rss_mb_max": round(rss.max_mb),
        "bench_s": round(time.monotonic() - began),
    }


def _progress(message: str) -> None:
    print(f"[bench state] {message}", file=sys.stderr, flush=True)
