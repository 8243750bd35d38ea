"""The load model's clocks: a source's rates over the time its readings cover, an epoch's
fixed work over the wall time the epoch took. The figures are those a real run published
(local[2], 500 rows/s, 1 s epochs) in an epoch that ran longer than the gap before it, the
kind a slow machine publishes every epoch; ``tests/engine/runtime/driver/test_real_load.py``
judges whole real runs."""

from __future__ import annotations

from typing import Any

from engine.dag import parse_job_graph
from engine.policies.load import load_model

GRAPH = parse_job_graph({
    "name": "load",
    "operators": [
        {"id": "events", "type": "source.generator", "params": {"rows_per_second": 500}},
        {"id": "views", "type": "filter", "params": {"condition": "event_type = 'view'"}},
        {"id": "counts", "type": "window_aggregate",
         "params": {"key": ["campaign_id"], "time": "event_time", "window": "2 seconds",
                    "aggregates": {"n": "count(*)"}}},
        {"id": "out", "type": "sink.memory", "params": {"name": "out"}},
    ],
    "edges": [{"from": "events", "to": "views"}, {"from": "views", "to": "counts"},
              {"from": "counts", "to": "out"}],
})


def _epoch(*, batch_ms: float, interval_ms: float, period_ms: float | None,
           offered: int, counts_busy_ms: float = 132.2) -> dict[str, Any]:
    source = {"unit": "rows", "offered": offered, "consumed": 1000, "backlog": 1033,
              "backlog_growth_per_s": -267.7}
    if period_ms is not None:
        source["period_ms"] = period_ms
    region = {"instances": 1, "busy_ms": None, "region": None}
    return {
        "batch_duration_ms": batch_ms, "interval_ms": interval_ms,
        "sources": {"events": source},
        "operators": {
            "events": {**region, "rows_in": None, "rows_out": 1000, "region": "events+views"},
            "views": {**region, "rows_in": 1000, "rows_out": 814, "region": "events+views"},
            "counts": {"instances": 1, "rows_in": 814, "rows_out": 371,
                       "busy_ms": [counts_busy_ms],
                       "region": None},
            "out": {**region, "rows_in": 371, "rows_out": 371, "region": "out"},
        },
        "regions": {
            "events+views": {"operators": ["events", "views"], "instances": 1,
                             "rows_in": 1000, "busy_ms": [33.0]},
            "out": {"operators": ["out"], "instances": 1, "rows_in": 371, "busy_ms": [109.0]},
        },
    }


def test_a_source_rate_covers_the_time_between_its_readings_not_between_epoch_starts():
    # 651 rows offered over the 1,304 ms since the last reading (the epoch before ended
    # 475 ms sooner after its start than this one), 829 ms after the last epoch started.
    epoch = _epoch(batch_ms=1171.1, interval_ms=828.8, period_ms=1304.0, offered=651)
    trend = load_model(GRAPH, [epoch]).sources["events"]
    assert round(trend.offered_rate) == 499
    assert round(trend.target_rate) == round(651 / 1.304 + 1033 / 30)
    # Epochs published before sources carried their period are read over their interval.
    older = _epoch(batch_ms=1171.1, interval_ms=828.8, period_ms=None, offered=651)
    assert round(load_model(GRAPH, [older]).sources["events"].offered_rate) == 785


def test_an_epoch_longer_than_the_gap_before_it_is_not_a_congested_run():
    model = load_model(GRAPH, [_epoch(batch_ms=1171.1, interval_ms=828.8, period_ms=1304.0,
                                      offered=651)])
    # The fixed work is the epoch's share of its own duration, never more than all of it.
    staged = 132.2 + 33.0 + 109.0
    assert round(model.overhead_share, 3) == round((1171.1 - staged) / 1171.1, 3)
    assert model.run_utilisation < 1.2
    assert model.congested_units() == []
    # Where the source offered far more than the epoch took, the epochs' wall time is
    # behind, but the operators' own busy time is not: the epoch's time goes outside them,
    # so no operator is congested.
    behind = load_model(GRAPH, [_epoch(batch_ms=1171.1, interval_ms=828.8, period_ms=1304.0,
                                       offered=2600)])
    assert behind.run_utilisation > 1.2
    assert behind.busy_utilisation < 1.0
    assert behind.congested_units() == []
    # The same epoch with the keyed count busy most of it: the count is the bottleneck.
    busy = load_model(GRAPH, [_epoch(batch_ms=1171.1, interval_ms=828.8, period_ms=1304.0,
                                     offered=2600, counts_busy_ms=900.0)])
    assert [u.unit_id for u in busy.congested_units()] == ["counts"]
