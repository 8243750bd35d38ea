"""The Redis stream source's row of ``python -m bench throughput``: rows per second read
from Redis Streams into the keyed window count, beside the generator feeding the same job
at the same rows per epoch, in the same session and the same run.

The streams hold the generator's events (event time in epoch milliseconds), written
before the run by Spark tasks; the source's cap is the rows per epoch, so each epoch reads
one second of event time, as the generator's does. Rows per second = rows over the summed
``triggerExecution`` of steady epochs (the whole micro-batch, offset planning included).

The row is measured twice, the events spread over 2 streams and over 8 (suffix ``_2``,
``_8``), each beside its own generator runs.

Headline figures:
- ``redis_rows_per_s_N`` / ``generator_rows_per_s_N``: input rows per second of steady
  epochs, the events in N streams;
- ``redis_vs_generator_N``: the Redis stream source's rows per second over the generator's;
- ``redis_vs_generator``: the lower of the two.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import redis
from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F

from bench.builtin import progress_ms
from bench.rounds import alternating_rounds, side_by_side
from bench.throughput import run_vsn
from bench.workload import KEYS, window_count_job
from engine.runtime.api import start_run
from engine.runtime.driver.metrics import CollectingPublisher
from engine.runtime.io.sources import GeneratorSpec, generator_rows

# A run's first epochs on the streams are slow while Spark warms up the data source's read
# path (8 epochs: from ~3 s down to ~1.2 s); both sources are measured after as many.
ROW_WARMUP = 8
STREAM_COUNTS = (2, 8)  # as many streams as cores, and more streams than cores
SCHEMA = {"event_id": "long", "event_time": "timestamp", "campaign_id": "long",
          "user_id": "long", "event_type": "string", "amount": "double"}


def redis_url() -> str:
    """The product's Redis: ``REDIS_URL``, else the embedded server under ``var/``."""
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"]
    from webapp import embedded
    from webapp.config import load_config

    return embedded.ensure_redis(var_dir=load_config().var_dir)


def fill_streams(spark: SparkSession, url: str, streams: list[str], rows: int,
                 rows_per_second: int) -> None:
    """Writes generator events 0..rows-1 round-robin into ``streams``."""
    spec = GeneratorSpec.from_params({"rows_per_second": rows_per_second, "keys": KEYS})
    events = generator_rows(spark, spec, 0, rows, 2).withColumn(
        "event_time", F.unix_millis("event_time")).orderBy("event_id")

    def write(part: Iterator[Row]) -> None:
        with redis.Redis.from_url(url) as client, client.pipeline(transaction=False) as pipe:
            for n, row in enumerate(part, 1):
                pipe.xadd(streams[row.event_id % len(streams)],
                          {k: str(v) for k, v in row.asDict().items()})
                if n % 5000 == 0:
                    pipe.execute()
            pipe.execute()

    # One task writes in event-id order, so each stream's entries are in event-time order.
    events.coalesce(1).foreachPartition(write)


def stream_job(url: str, streams: list[str], rows_per_batch: int,
               parallelism: int) -> dict[str, Any]:
    """The generator's window-count job with the Redis streams as its source: rows computed
    and discarded, as the generator's run (``run_vsn``) does."""
    source = {
        "id": "events", "type": "source.redis_stream",
        "params": {"url": url, "streams": streams, "start": "earliest",
                   "max_entries_per_epoch": rows_per_batch, "schema": SCHEMA,
                   "time_field": "event_time"},
    }
    job = window_count_job(source, parallelism, "bench_redis")
    job["operators"][-1] = {"id": "out", "type": "sink.noop", "params": {}}
    return job


def run_redis(spark: SparkSession, url: str, rows_per_batch: int, epochs: int,
              parallelism: int, streams: list[str]) -> list[float]:
    """Runs the job over ``streams`` from their first entry, returns steady epochs'
    durations (ms)."""
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as checkpoint:
        run = start_run(stream_job(url, streams, rows_per_batch, parallelism),
                        checkpoint=checkpoint, publisher=CollectingPublisher(), spark=spark,
                        trigger_ms=0, stop_after_epoch=epochs - 1)
        run.wait()
        assert run.failure() is None, run.failure()
        progress = [p for p in run.progress() if p["batchId"] < epochs]
    return [progress_ms(p) for p in progress[ROW_WARMUP:]]


def measure_redis_row(spark: SparkSession, rows_per_batch: int = 50_000, epochs: int = 16,
                      rounds: int = 2, parallelism: int = 2) -> dict[str, Any]:
    """Per stream count, a warm-up of both sources, then ``rounds`` rounds alternating
    which goes first."""
    url = redis_url()

    def generator() -> list[float]:
        return [progress_ms(p) for p in run_vsn(spark, rows_per_batch, epochs,
                                                parallelism)[ROW_WARMUP:]]

    started = time.monotonic()
    figures: dict[str, Any] = {"rows_per_batch": rows_per_batch}
    for count in STREAM_COUNTS:
        # Filled once: every run reads the same entries from the first, with its own
        # checkpoint.
        streams = [f"bench:{uuid.uuid4().hex[:8]}:{i}" for i in range(count)]
        try:
            fill_streams(spark, url, streams, rows_per_batch * epochs, rows_per_batch)
            redis_ms, generator_ms = alternating_rounds(
                partial(run_redis, spark, url, rows_per_batch, epochs, parallelism, streams),
                generator, rounds)
        finally:
            with redis.Redis.from_url(url) as client:
                client.delete(*streams)
        side = side_by_side(rows_per_batch, ("redis", redis_ms), ("generator", generator_ms),
                            ratio="redis_vs_generator")
        figures.update({f"{name}_{count}": value for name, value in side.items()})
        print(f"[bench throughput] redis_stream {count} streams: {side}", file=sys.stderr,
              flush=True)
    figures["redis_vs_generator"] = min(figures[f"redis_vs_generator_{c}"]
                                        for c in STREAM_COUNTS)
    figures["bench_s"] = round(time.monotonic() - started, 1)
    return figures
