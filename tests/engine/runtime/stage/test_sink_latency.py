"""What a sink costs an epoch on a real run: the end-to-end latency (event time to sink
commit) is observed by the sink's own write, with no Spark job of its own, and an epoch
whose instances emitted nothing writes its sink without a Spark job."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine.runtime.api import start_run
from engine.runtime.driver.metrics import CollectingPublisher
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_epochs
from engine.runtime.operators.window_spec import WINDOW_END
from tests.engine.runtime.jobs import window_job

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def finished(spark, tmp_path_factory) -> dict[str, Any]:
    """A window count run for 10 epochs into a memory sink: its metrics and its rows."""
    checkpoint = tmp_path_factory.mktemp("sink_cost")
    name = checkpoint.name  # sink_cost0, sink_cost1, ...
    publisher = CollectingPublisher()
    run = start_run(window_job({"type": "sink.memory", "params": {"name": name}}),
                    checkpoint=str(checkpoint / "ckpt"), publisher=publisher, spark=spark,
                    epoch_ms=1000, trigger_ms=0, stop_after_epoch=9)
    assert run.wait(240) == "stopped"
    run.flush()
    committed = memory_sink_epochs(name)
    clear_memory_sink(name)
    return {"run_id": run.run_id, "epochs": publisher.epochs, "committed": committed}


def _jobs(spark, finished: dict[str, Any], epoch: int, group: str) -> list[int]:
    name = f"streamscale-{finished['run_id']}:{epoch}:{group}"
    return list(spark.sparkContext.statusTracker().getJobIdsForGroup(name))


def _window_ends_us(table: pa.Table) -> set[int]:
    return set(pc.cast(table[WINDOW_END], pa.int64()).to_pylist())


def test_each_epoch_s_latency_is_measured_on_the_rows_its_sink_committed(spark, finished):
    measured = 0
    for metrics in finished["epochs"]:
        latency, rows = metrics["latency_ms"], finished["committed"].get(metrics["epoch"])
        assert _jobs(spark, finished, metrics["epoch"], "__latency") == []
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


def test_an_epoch_that_emitted_nothing_commits_its_sink_without_a_spark_job(spark, finished):
    emitted = {m["epoch"]: m["operators"]["counts"]["rows_out"] for m in finished["epochs"]}
    assert 0 in emitted.values() and any(emitted.values())
    for epoch, rows in emitted.items():
        assert finished["committed"][epoch].num_rows == rows  # every epoch is committed
        assert bool(_jobs(spark, finished, epoch, "out")) == (rows > 0), epoch
    empty = [finished["committed"][e] for e, rows in emitted.items() if rows == 0]
    full = next(finished["committed"][e] for e, rows in emitted.items() if rows)
    assert all(table.schema == full.schema for table in empty)


def test_a_noop_sink_computes_the_rows_it_discards(spark, tmp_path) -> None:
    """The benchmarks' sink: an epoch that emitted rows runs the sink's write (its latency
    observed on it, as for a sink that keeps them); one that emitted none runs no job."""
    publisher = CollectingPublisher()
    run = start_run(window_job({"type": "sink.noop", "params": {}}),
                    checkpoint=str(tmp_path / "ckpt"), publisher=publisher, spark=spark,
                    epoch_ms=1000, trigger_ms=0, stop_after_epoch=9)
    assert run.wait(240) == "stopped"
    run.flush()
    finished = {"run_id": run.run_id}
    emitted = {m["epoch"]: m["operators"]["counts"]["rows_out"] for m in publisher.epochs}
    assert 0 in emitted.values() and any(emitted.values())
    for metrics in publisher.epochs:
        rows = emitted[metrics["epoch"]]
        assert bool(_jobs(spark, finished, metrics["epoch"], "out")) == (rows > 0)
        assert (metrics["latency_ms"]["p50"] is not None) == (rows > 0), metrics["epoch"]
