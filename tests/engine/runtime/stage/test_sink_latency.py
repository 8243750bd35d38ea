"""End-to-end latency (event time to sink commit) on a real run: observed by the sinks' own
writes, so it costs the epoch no Spark job of its own."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine.runtime.api import start_run
from engine.runtime.driver.metrics import CollectingPublisher
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_epochs
from engine.runtime.operators.window_spec import WINDOW_END
from tests.engine.runtime.jobs import window_job

pytestmark = pytest.mark.spark


def _window_ends_us(table: pa.Table) -> set[int]:
    return set(pc.cast(table[WINDOW_END], pa.int64()).to_pylist())


def test_each_epoch_s_latency_is_measured_on_the_rows_its_sink_committed(spark, tmp_path):
    name = f"latency_{tmp_path.name}"
    publisher = CollectingPublisher()
    run = start_run(window_job({"type": "sink.memory", "params": {"name": name}}),
                    checkpoint=str(tmp_path / "ckpt"), publisher=publisher, spark=spark,
                    epoch_ms=1000, trigger_ms=0, stop_after_epoch=9)
    assert run.wait(240) == "stopped"
    run.flush()
    committed = memory_sink_epochs(name)
    clear_memory_sink(name)

    measured = 0
    for metrics in publisher.epochs:
        latency, rows = metrics["latency_ms"], committed.get(metrics["epoch"])
        if rows is None or rows.num_rows == 0:
            assert latency == {"p50": None, "p99": None, "max": None}, metrics["epoch"]
            continue
        measured += 1
        # (Negative when the epochs, back to back, run event time ahead of the clock.)
        assert latency["max"] >= latency["p99"] >= latency["p50"], latency
        # Each figure is commit time less one of the committed rows' window ends.
        ends = _window_ends_us(rows)
        oldest = min(ends)
        for figure in ("p50", "p99"):
            end_us = oldest + (latency["max"] - latency[figure]) * 1000.0
            assert any(abs(end_us - e) <= 200 for e in ends), (figure, latency, sorted(ends))
    assert measured >= 2  # windows closed in several epochs

    tracker = spark.sparkContext.statusTracker()
    for metrics in publisher.epochs:
        group = f"streamscale-{run.run_id}:{metrics['epoch']}:__latency"
        assert list(tracker.getJobIdsForGroup(group)) == []
