"""A keyed operator's event-time progress and rows per instance in an epoch's metrics: what
the run page shows to explain why sinks after a window get nothing for a while. Pure: the
metrics are built from an epoch's reports, without a Spark session (but for one run on it)."""

from __future__ import annotations

import pytest

from engine.dag import parse_job_graph
from engine.planner import plan_job
from engine.runtime.control.run_config import initial_config
from engine.runtime.driver.metrics import epoch_metrics
from engine.runtime.stage.pipeline import EpochResult

WINDOWED = {
    "name": "windowed", "key_groups": 16,
    "operators": [
        {"id": "events", "type": "source.generator", "params": {"rows_per_second": 100}},
        {"id": "counts", "type": "window_aggregate", "parallelism": 2,
         "params": {"key": ["campaign_id"], "time": "event_time", "window": "10 seconds",
                    "watermark": "5 seconds", "aggregates": {"views": "count(*)"}}},
        {"id": "out", "type": "sink.memory", "params": {}},
    ],
    "edges": [{"from": "events", "to": "counts"}, {"from": "counts", "to": "out"}],
}
NOW_MS = 1_700_000_020_000.0


def _report(instance: int, rows: int, newest_ms: float | None) -> dict:
    newest_us = None if newest_ms is None else int(newest_ms * 1000)
    return {"instance": instance, "busy_ms": 40.0, "rows_in": rows, "rows_out": 0,
            "bytes_written": 0, "max_event_us": newest_us}


def _metrics(reports: list[dict], watermark_ms: float | None) -> dict:
    graph = parse_job_graph(WINDOWED)
    result = EpochResult(stage_reports={"counts": reports}, rows_out={"events": 100})
    watermarks = {"counts": None if watermark_ms is None else int(watermark_ms * 1000)}
    return epoch_metrics("r1", 7, graph, initial_config(plan_job(graph)), result, 900.0, 1000.0, {},
                         watermarks=watermarks, ended_ms=NOW_MS)


def test_a_keyed_operator_reports_its_watermark_and_how_far_it_is_behind():
    counts = _metrics([_report(0, 70, NOW_MS - 1500), _report(1, 30, NOW_MS - 1200)],
                      watermark_ms=NOW_MS - 7000)["operators"]["counts"]
    assert counts["watermark_ms"] == NOW_MS - 7000
    assert counts["max_event_ms"] == NOW_MS - 1200  # the newest of the instances'
    assert counts["watermark_delay_ms"] == 7000.0  # behind the wall clock
    assert counts["watermark_lag_ms"] == 5800.0  # behind the newest event
    assert counts["rows_in_per_instance"] == [70, 30]
    assert counts["rows_in"] == 100  # the contract's fields keep their meaning


def test_before_the_first_rows_there_is_no_watermark_and_other_operators_have_none():
    metrics = _metrics([_report(0, 0, None), _report(1, 0, None)], watermark_ms=None)
    counts = metrics["operators"]["counts"]
    assert counts["watermark_ms"] is None and counts["watermark_delay_ms"] is None
    assert counts["watermark_lag_ms"] is None and counts["max_event_ms"] is None
    assert "watermark_ms" not in metrics["operators"]["out"]


@pytest.mark.spark
def test_a_run_on_spark_reports_each_epoch_s_watermark_of_its_window(spark, tmp_path):
    from engine.runtime.api import start_run
    from engine.runtime.driver.metrics import CollectingPublisher
    from tests.engine.runtime.jobs import WATERMARK_S, window_job

    publisher = CollectingPublisher()
    job = window_job({"type": "sink.memory", "params": {"name": f"wm_{tmp_path.name}"}})
    run = start_run(job, checkpoint=str(tmp_path / "ckpt"), publisher=publisher, spark=spark,
                    epoch_ms=1000, trigger_ms=0, stop_after_epoch=3)
    assert run.wait(180) == "stopped"
    run.flush()
    counts = [m["operators"]["counts"] for m in sorted(publisher.epochs,
                                                         key=lambda m: m["epoch"])]
    assert counts[0]["watermark_ms"] is None  # the first epoch runs before any row was seen
    later = counts[1:]
    assert later and all(c["watermark_ms"] is not None for c in later)
    # Behind the newest event by the job's watermark delay plus the epoch's new event time
    # (an epoch takes one second of events here); behind the clock by whatever that is.
    delay = WATERMARK_S * 1000
    assert all(delay <= c["watermark_lag_ms"] <= delay + 2000 for c in later), later
    assert all(c["watermark_delay_ms"] is not None for c in later)
    assert all(sum(c["rows_in_per_instance"]) == c["rows_in"] for c in counts)
