"""``python -m bench throughput``: VSN vs Spark's built-in streaming aggregation.

Same generated events (100k keys, 10 s tumbling windows, 2 s watermark), same session,
same run, both into a sink that computes the rows and discards them (Spark's ``noop``
format; the VSN job's ``sink.noop`` runs the same write). Rows per second = input rows over
the summed durations of steady micro-batches, each the whole micro-batch with its logs: Spark's
``triggerExecution`` (offset and commit logs included) and the VSN run's report of each epoch
in the same form (from its start to its outcome logged: a run of clock sources has no Spark
query, its epoch log is its only log, ``engine.runtime.driver.loop``); a first round
of each engine warms the JVM and the Python workers and is not measured, and so are the
first epochs of every run.

Headline figures:
- ``vsn_rows_per_s`` / ``spark_rows_per_s``: input rows per second of steady epochs;
- ``ratio``: VSN's rows per second over Spark's;
- ``redis_stream``: the Redis stream source's row (``bench.redis_source``).
- ``nats``: the NATS JetStream source's row (``bench.nats_source``).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from typing import Any

from bench.builtin import builtin_checkpoint, progress_ms, run_builtin
from bench.rounds import alternating_rounds, side_by_side
from bench.workload import generator_source, window_count_job
from engine.runtime.api import start_run
from engine.runtime.driver.metrics import CollectingPublisher
from engine.runtime.spark.session import build_session

WARMUP = 3


def run_vsn(spark: Any, rows_per_batch: int, epochs: int, parallelism: int) -> list[dict[str, Any]]:
    """Runs the VSN job for ``epochs`` epochs; returns the run's progress of each epoch,
    whose ``triggerExecution`` covers the whole epoch as for the built-in query's micro-batch
    (the epoch metrics' ``batch_duration_ms`` is the same span less queuing its metrics)."""
    publisher = CollectingPublisher()
    with tempfile.TemporaryDirectory(prefix="bench-vsn-") as checkpoint:
        # The events made by as many tasks as the baseline's source reads them in.
        source = generator_source(rows_per_batch, parallelism=spark.sparkContext.defaultParallelism)
        job = window_count_job(source, parallelism, "bench_throughput")
        # Rows computed and discarded, as the baseline's noop sink does.
        job["operators"][-1] = {"id": "out", "type": "sink.noop", "params": {}}
        run = start_run(
            job,
            checkpoint=checkpoint,
            publisher=publisher,
            spark=spark,
            epoch_ms=1000,
            trigger_ms=0,
            stop_after_epoch=epochs - 1,
        )
        run.wait()
        progress = run.progress()
    return [p for p in progress if p["batchId"] < epochs]


def measure(
    rows_per_batch: int = 200_000, epochs: int = 15, rounds: int = 3, parallelism: int = 2
) -> dict[str, Any]:
    """A warm-up round of both engines (not measured: the JVM's first query pays for
    class loading and JIT), then ``rounds`` rounds, alternating which engine goes first;
    the figures are over all steady epochs of the measured rounds."""
    spark = build_session(app_name="bench-throughput")

    def builtin() -> list[float]:
        with builtin_checkpoint("bench-builtin-") as checkpoint:
            progress = run_builtin(
                spark, rows_per_batch, epochs, checkpoint, int(time.time() * 1000)
            )
        return [progress_ms(p) for p in progress[WARMUP:]]

    def vsn() -> list[float]:
        progress = run_vsn(spark, rows_per_batch, epochs, parallelism)
        return [progress_ms(p) for p in progress[WARMUP:]]

    from bench.nats_source import measure_nats_row
    from bench.redis_source import measure_redis_row

    spark_ms, vsn_ms = alternating_rounds(builtin, vsn, rounds)
    figures = {
        "rows_per_batch": rows_per_batch,
        "keys": 100_000,
        **side_by_side(rows_per_batch, ("vsn", vsn_ms), ("spark", spark_ms), ratio="ratio"),
    }
    print(f"[bench throughput] {json.dumps(figures)}", file=sys.stderr, flush=True)
    return {**figures, "redis_stream": measure_redis_row(spark), "nats": measure_nats_row(spark)}
