"""The run page's drill-down series: one operator's figures per epoch, oldest first, the busy
share of each instance (a fused region's labelled as the region's), the keyed figures, only the
epochs after `since_epoch`, and a 404 naming an operator the run does not have."""

from __future__ import annotations

import pytest

from tests.webapp.conftest import epoch_metrics
from webapp.accounts.roles import Role
from webapp.jobs.metrics import run_epoch_record

pytestmark = pytest.mark.django_db


def _record(run, epoch: int, **counts) -> None:
    metrics = epoch_metrics(epoch, counts_in=100.0 * epoch, counts_capacity=5000.0)
    metrics["interval_ms"] = 1000.0
    metrics["operators"]["counts"].update(counts)
    metrics["operators"]["events"]["rows_in"] = None
    assert run_epoch_record(run_id=run.pk, metrics=metrics, sinks=frozenset({"out"}))


def test_an_operator_s_series_per_epoch_and_per_instance(session_client, live_run):
    for epoch in (1, 2, 3):
        _record(live_run, epoch, busy_ms=[900.0, 300.0], watermark_delay_ms=4000.0 + epoch,
                state_bytes_read=10 * epoch, state_bytes_written=5)
    client = session_client(Role.VIEWER)
    series = client.get(f"/runs/{live_run.pk}/operators/counts/series.json").json()
    assert series["operator"] == {"id": "counts", "type": "window_aggregate"}
    assert series["epoch"] == [1, 2, 3]
    assert series["in"] == [100.0, 200.0, 300.0]
    assert series["busy"] == [[90.0, 90.0, 90.0], [30.0, 30.0, 30.0]]
    assert series["watermark_lag"] == [4001.0, 4002.0, 4003.0]
    assert series["state_read"] == [10, 20, 30]
    assert series["region"] is None

    later = client.get(f"/runs/{live_run.pk}/operators/counts/series.json?since_epoch=2").json()
    assert later["epoch"] == [3]
    assert later["busy"] == [[90.0], [30.0]]


def test_a_fused_region_s_busy_time_is_the_region_s(session_client, live_run):
    metrics = epoch_metrics(1, counts_in=100.0, counts_capacity=5000.0)
    metrics["interval_ms"] = 1000.0
    metrics["operators"]["views"]["region"] = "r0"
    metrics["regions"] = {"r0": {"operators": ["events", "views"], "busy_ms": [400.0]}}
    assert run_epoch_record(run_id=live_run.pk, metrics=metrics, sinks=frozenset({"out"}))
    series = session_client(Role.VIEWER).get(
        f"/runs/{live_run.pk}/operators/views/series.json").json()
    assert series["region"] == "r0"
    assert series["busy"] == [[40.0]]


def test_an_unknown_operator_is_named_in_the_404(session_client, live_run):
    answer = session_client(Role.VIEWER).get(f"/runs/{live_run.pk}/operators/nope/series.json")
    assert answer.status_code == 404
    assert "nope" in answer.content.decode()
