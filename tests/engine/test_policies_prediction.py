"""A change's prediction from the load model: the unit the change touches gains capacity with
its instances, its congestion and the run's bottleneck are judged again by the load model's
rules, the backlog's drain time follows the run's capacity, and the policies' rates call
congested what the model does."""

from __future__ import annotations

from typing import Any

import pytest

from engine.policies.etp import is_congested
from engine.policies.load import load_model
from engine.policies.prediction import load_rates, predict_change
from tests.engine.test_policies_load import GRAPH


def _epoch(*, counts_busy_ms: float, backlog: int = 3000) -> dict[str, Any]:
    """1 s epochs offering 1000 rows/s, counts taking ``counts_busy_ms`` for its 800 rows."""
    region = {"instances": 1, "busy_ms": None}
    return {
        "batch_duration_ms": 1000.0, "interval_ms": 1000.0,
        "sources": {"events": {"unit": "rows", "offered": 1000, "consumed": 1000,
                               "backlog": backlog, "backlog_growth_per_s": 0.0,
                               "period_ms": 1000.0}},
        "operators": {
            "events": {**region, "rows_in": None, "rows_out": 1000, "region": "events+views"},
            "views": {**region, "rows_in": 1000, "rows_out": 800, "region": "events+views"},
            "counts": {"instances": 1, "rows_in": 800, "rows_out": 100,
                       "busy_ms": [counts_busy_ms], "region": None},
            "out": {**region, "rows_in": 100, "rows_out": 100, "region": "out"},
        },
        "regions": {
            "events+views": {"operators": ["events", "views"], "instances": 1,
                             "rows_in": 1000, "busy_ms": [50.0]},
            "out": {"operators": ["out"], "instances": 1, "rows_in": 100, "busy_ms": [10.0]},
        },
    }


def test_more_instances_of_the_bottleneck_raise_capacity_and_drain_the_backlog():
    epochs = [_epoch(counts_busy_ms=1600.0)] * 3  # counts: 500 rows/s, asked for 880
    found = predict_change(GRAPH, epochs, {"counts": 3})
    now, after = found["now"], found["after"]
    assert now.bottleneck == "counts" and "counts" in now.congested
    assert now.drain_s is None  # capacity below the offered rate: the backlog only grows
    assert after.bottleneck is None and after.congested == []
    assert after.capacity_rate > now.capacity_rate > 0
    assert after.drain_s == pytest.approx(3000 / (after.capacity_rate - 1000), rel=1e-6)
    assert after.etp["events"] > now.etp["events"]


def test_no_change_predicts_what_is_measured():
    epochs = [_epoch(counts_busy_ms=1600.0)] * 3
    found = predict_change(GRAPH, epochs, {"counts": 1})
    assert found["now"].to_dict() == found["after"].to_dict()


@pytest.mark.parametrize("busy_ms", [200.0, 1600.0])
def test_the_policies_rates_call_congested_what_the_load_model_does(busy_ms):
    epochs = [_epoch(counts_busy_ms=busy_ms)] * 3
    model = load_model(GRAPH, epochs)
    rates = load_rates(GRAPH, epochs)
    for op_id in ("views", "counts", "out"):
        unit = model.unit_of(op_id)
        assert is_congested(GRAPH, rates, op_id) == bool(unit and unit.congested), op_id
