"""The runtime executes the planner's plan: a stateless region runs on as many instances as
planned (its rows are split that way, and the metrics say so as measured), and where the
order of rows reaches an ordered sink the merge by sequence number restores the order a
sequential run writes."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from engine.runtime.api import start_run
from engine.runtime.driver.metrics import CollectingPublisher
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_rows

pytestmark = pytest.mark.spark

LAST_EPOCH = 3


def _job(tag_parallelism: int, sink: str) -> dict[str, Any]:
    return {
        "name": "plan-executed",
        "key_groups": 16,
        "operators": [
            {"id": "events", "type": "source.generator",
             "params": {"rows_per_second": 3000, "keys": 50}},
            {"id": "tag", "type": "map", "parallelism": tag_parallelism,
             "params": {"columns": {"doubled": "event_id * 2"}}},
            {"id": "out", "type": "sink.memory", "params": {"name": sink}},
        ],
        "edges": [{"from": "events", "to": "tag"}, {"from": "tag", "to": "out"}],
    }


def _run(spark: Any, tmp_path: Any, tag_parallelism: int) -> tuple[list[int], list[dict]]:
    sink = f"sink_{uuid.uuid4().hex[:8]}"
    publisher = CollectingPublisher()
    run = start_run(_job(tag_parallelism, sink), checkpoint=str(tmp_path / sink),
                    publisher=publisher, spark=spark, epoch_ms=1000, trigger_ms=0,
                    stop_after_epoch=LAST_EPOCH)
    try:
        assert run.wait(180) == "stopped", run.failure()
        run.flush()
        rows = memory_sink_rows(sink)
        assert rows is not None and rows.num_rows > 1000
        return rows.column("event_id").to_pylist(), publisher.epochs
    finally:
        clear_memory_sink(sink)


def test_a_stateless_region_runs_on_its_planned_instances_in_sequential_order(spark, tmp_path):
    sequential, _ = _run(spark, tmp_path, 1)
    assert sequential == sorted(sequential)  # the source's order, kept by one instance

    parallel, epochs = _run(spark, tmp_path, 3)
    assert parallel == sorted(parallel)  # merged by sequence number: the same order
    assert len(parallel) == len(set(parallel))
    for metrics in epochs:
        assert metrics["operators"]["tag"]["instances"] == 3
        region = metrics["regions"][metrics["operators"]["tag"]["region"]]
        assert region["instances"] == 3, region  # measured: the tasks that ran its rows
