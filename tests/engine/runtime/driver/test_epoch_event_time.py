"""A keyed operator's event-time progress and rows per instance in an epoch's metrics: what
the run page shows to explain why sinks after a window get nothing for a while. Pure: the
metrics are built from an epoch's reports, without a Spark session."""

from __future__ import annotations

from engine.dag import parse_job_graph
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
    return epoch_metrics("r1", 7, graph, initial_config(graph), result, 900.0, 1000.0, {},
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
