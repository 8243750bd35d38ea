"""The NATS JetStream source's row of ``python -m bench throughput``: rows per second read
from a JetStream stream into the keyed window count, beside the generator feeding the same
job at the same rows per epoch, in the same session and the same run.

The stream holds the generator's events as JSON objects (event time in epoch milliseconds),
written before the run by a Spark task; the source's cap is the rows per epoch, so each
epoch reads one second of event time, as the generator's does. Rows per second = rows over
the summed ``triggerExecution`` of steady epochs (the whole micro-batch, offset planning
included). The server is ``NATS_URL``, else the embedded one under ``var/``.

Headline figures:
- ``nats_rows_per_s`` / ``generator_rows_per_s``: input rows per second of steady epochs;
- ``nats_vs_generator``: the NATS source's rows per second over the generator's.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

import nats
from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F

from bench.builtin import progress_ms
from bench.redis_source import ROW_WARMUP, SCHEMA
from bench.rounds import alternating_rounds, side_by_side
from bench.throughput import run_vsn
from bench.workload import KEYS, window_count_job
from engine.runtime.api import start_run
from engine.runtime.driver.metrics import CollectingPublisher
from engine.runtime.io.broker.nats_producer import ensure_stream, publish_all
from engine.runtime.io.sinks import clear_memory_sink
from engine.runtime.io.sources import GeneratorSpec, generator_rows


def nats_url() -> str:
    """The product's NATS: ``NATS_URL``, else the embedded server under ``var/``."""
    if os.environ.get("NATS_URL"):
        return os.environ["NATS_URL"]
    from webapp import embedded
    from webapp.config import load_config

    return embedded.ensure_nats(var_dir=load_config().var_dir)


def fill_stream(spark: SparkSession, url: str, stream: str, rows: int,
                rows_per_second: int) -> None:
    """Writes generator events 0..rows-1 into ``stream``, in event-id order."""
    spec = GeneratorSpec.from_params({"rows_per_second": rows_per_second, "keys": KEYS})
    events = generator_rows(spark, spec, 0, rows, 2).withColumn(
        "event_time", F.unix_millis("event_time")).orderBy("event_id")

    def write(part: Iterator[Row]) -> None:
        async def publish() -> None:
            client = await nats.connect(url)
            try:
                await ensure_stream(client, stream, [f"{stream}.>"])
                await publish_all(client, f"{stream}.events",
                                  (json.dumps(row.asDict()).encode() for row in part))
            finally:
                await client.close()

        asyncio.run(publish())

    events.coalesce(1).foreachPartition(write)


def run_nats(spark: SparkSession, url: str, rows_per_batch: int, epochs: int,
             parallelism: int) -> list[float]:
    """Fills a fresh stream, runs the job over it, returns steady epochs' durations (ms)."""
    stream = f"BENCH_{uuid.uuid4().hex[:8]}"
    try:
        fill_stream(spark, url, stream, rows_per_batch * epochs, rows_per_batch)
        source = {"id": "events", "type": "source.nats",
                  "params": {"url": url, "streams": [stream], "start": "earliest",
                             "max_entries_per_epoch": rows_per_batch, "schema": SCHEMA,
                             "time_field": "event_time"}}
        with tempfile.TemporaryDirectory(prefix="bench-nats-") as checkpoint:
            run = start_run(window_count_job(source, parallelism, "bench_nats"),
                            checkpoint=checkpoint, publisher=CollectingPublisher(), spark=spark,
                            trigger_ms=0, stop_after_epoch=epochs - 1)
            run.wait()
            assert run.failure() is None, run.failure()
            progress = [p for p in run.progress() if p["batchId"] < epochs]
        clear_memory_sink("bench_nats")
        return [progress_ms(p) for p in progress[ROW_WARMUP:]]
    finally:
        asyncio.run(_delete(url, stream))


async def _delete(url: str, stream: str) -> None:
    client = await nats.connect(url)
    try:
        await client.jetstream().delete_stream(stream)
    finally:
        await client.close()


def measure_nats_row(spark: SparkSession, rows_per_batch: int = 50_000, epochs: int = 16,
                     rounds: int = 2, parallelism: int = 2) -> dict[str, Any]:
    """A warm-up of both sources, then ``rounds`` rounds alternating which goes first."""
    url = nats_url()

    def generator() -> list[float]:
        return [progress_ms(p) for p in run_vsn(spark, rows_per_batch, epochs,
                                                parallelism)[ROW_WARMUP:]]

    def from_nats() -> list[float]:
        return run_nats(spark, url, rows_per_batch, epochs, parallelism)

    started = time.monotonic()
    nats_ms, generator_ms = alternating_rounds(from_nats, generator, rounds)
    return {
        "rows_per_batch": rows_per_batch,
        "streams": 1,
        **side_by_side(rows_per_batch, ("nats", nats_ms), ("generator", generator_ms),
                       ratio="nats_vs_generator"),
        "bench_s": round(time.monotonic() - started, 1),
    }
