"""The autoscaler: DS2 proposals within bounds, visible in recommend mode, applied through the
audited workflow in auto mode, with a cooldown."""

from __future__ import annotations

import json

import pytest

from tests.webapp.conftest import epoch_metrics
from webapp.audit.models import AuditEntry
from webapp.autoscaling.services import autoscale_evaluate
from webapp.jobs.metrics import run_epoch_record
from webapp.jobs.models import Reconfiguration, Run

pytestmark = pytest.mark.django_db


def _configure(client, run, **body):
    return client.post(
        f"/api/runs/{run.pk}/autoscale", data=json.dumps(body), content_type="application/json"
    )


def _load(run, *, counts_in: float, counts_capacity: float, epochs: int = 5):
    for epoch in range(epochs):
        run_epoch_record(
            run_id=run.pk,
            metrics=epoch_metrics(epoch, counts_in=counts_in, counts_capacity=counts_capacity),
        )


def test_recommend_mode_proposes_ds2_parallelism_without_acting(
    token_client, live_run, django_capture_on_commit_callbacks
):
    client = token_client("operator")
    assert _configure(client, live_run, mode="recommend").status_code == 200
    _load(live_run, counts_in=9000, counts_capacity=4000)  # 2000 rows/s per instance
    with django_capture_on_commit_callbacks(execute=False) as published:
        autoscale_evaluate()
    assert len(published) == 1  # the new proposal goes out live
    with django_capture_on_commit_callbacks(execute=False) as unchanged:
        autoscale_evaluate()
    assert unchanged == []  # the same proposal again is not re-sent
    live_run.refresh_from_db()
    assert live_run.autoscale_proposal["changes"] == {"counts": 5}
    assert "9000 rows/s in" in live_run.autoscale_proposal["reasons"]["counts"]
    assert Reconfiguration.objects.count() == 0
    proposal = client.get(f"/api/runs/{live_run.pk}").json()["autoscale"]["proposal"]
    assert proposal["changes"] == {"counts": 5}


def test_auto_mode_applies_through_the_workflow_and_respects_bounds(
    token_client, live_run, django_capture_on_commit_callbacks
):
    client = token_client("operator")
    _configure(client, live_run, mode="auto", max=4, cooldown_s=300)
    _load(live_run, counts_in=9000, counts_capacity=4000)
    with django_capture_on_commit_callbacks(execute=False):
        autoscale_evaluate()
    record = Reconfiguration.objects.get()
    assert record.trigger == "policy" and record.actor is None
    assert record.plan_after["operators"][2]["parallelism"] == 4  # DS2 said 5; max is 4
    assert "kept within bounds" in record.reason
    entry = AuditEntry.objects.get(action="reconfiguration.rescale")
    assert entry.actor_name == "policy" and entry.trigger == "policy"
    # Still inside the cooldown (and the first change still open): nothing more happens.
    autoscale_evaluate()
    assert Reconfiguration.objects.count() == 1


def test_no_proposal_until_every_operator_has_rates(token_client, live_run):
    _configure(token_client("operator"), live_run, mode="auto")
    autoscale_evaluate()
    live_run.refresh_from_db()
    assert live_run.autoscale_proposal["changes"] == {}
    assert "waiting" in live_run.autoscale_proposal["note"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"mode": "sometimes"}, "mode"),
        ({"mode": "auto", "min": 0}, "min"),
        ({"mode": "auto", "min": 5, "max": 2}, "max"),
        ({"mode": "auto", "cooldown_s": "1"}, "cooldown_s"),
    ],
)
def test_bad_settings_are_refused(token_client, live_run, body, field):
    response = _configure(token_client("operator"), live_run, **body)
    assert response.status_code == 400 and field in response.json()["error"]
    assert Run.objects.get(pk=live_run.pk).autoscale_mode == "off"
