"""The autoscaler service on real load: epochs measured by real engine runs on Spark (one that
falls behind, one that keeps up) are recorded as a driver records them; recommend shows the
decision, auto applies it through the audited workflow with the figures that drove it, then
waits for it to take effect. Settings are checked."""

from __future__ import annotations

import copy
import json
import tempfile
import uuid
from typing import Any

import pytest

from webapp.audit.models import AuditEntry
from webapp.autoscaling.services import autoscale_evaluate
from webapp.jobs.metrics import run_epoch_record
from webapp.jobs.models import Reconfiguration, Run, RunStatus, Trigger

LOAD_DAG: dict[str, Any] = {
    "name": "load-job",
    "operators": [
        {"id": "events", "type": "source.generator",
         "params": {"rows_per_second": 1000, "keys": 1000}},
        {"id": "views", "type": "filter", "params": {"condition": "event_type = 'view'"}},
        {"id": "counts", "type": "window_aggregate",
         "params": {"key": ["campaign_id"], "time": "event_time", "window": "2 seconds",
                    "watermark": "2 seconds", "aggregates": {"views": "count(*)"}}},
        {"id": "out", "type": "sink.memory", "params": {}},
    ],
    "edges": [{"from": "events", "to": "views"}, {"from": "views", "to": "counts"},
              {"from": "counts", "to": "out"}],
}


def _variant(rate: int, cap: int | None, window: dict[str, str]) -> dict[str, Any]:
    dag = copy.deepcopy(LOAD_DAG)
    dag["operators"][0]["params"]["rows_per_second"] = rate
    if cap is not None:
        dag["operators"][0]["params"]["max_rows_per_epoch"] = cap
    dag["operators"][2]["params"].update(window)
    dag["operators"][3]["params"]["name"] = f"sink_{uuid.uuid4().hex[:8]}"
    return dag


def _measure(
    spark: Any, dag: dict[str, Any], epochs: int, epoch_ms: int = 1000
) -> list[dict[str, Any]]:
    from engine.runtime.api import start_run
    from engine.runtime.driver.metrics import CollectingPublisher
    from engine.runtime.io.sinks import clear_memory_sink

    publisher = CollectingPublisher()
    with tempfile.TemporaryDirectory(prefix="autoscale-test-") as checkpoint:
        run = start_run(dag, checkpoint=checkpoint, publisher=publisher, spark=spark,
                        epoch_ms=epoch_ms, stop_after_epoch=epochs - 1)
        assert run.wait(600) == "stopped"
    clear_memory_sink(dag["operators"][3]["params"]["name"])
    return publisher.epochs


@pytest.fixture(scope="module")
def measured(spark: Any) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Two real runs on Spark: 300 windows per row at far more rows than one instance takes,
    and a light tumbling count that keeps up. The light one runs 3 s epochs: an epoch's
    fixed cost (its Spark jobs) measured 0.44 to 1.22 s at 500 rows/s on an idle 2-core
    machine, so 1 s epochs fall behind on a busy one for that alone."""
    behind = _variant(200_000, 30_000, {"window": "30 seconds", "slide": "100 milliseconds"})
    keeping_up = _variant(500, None, {})
    return {"behind": (behind, _measure(spark, behind, 8)),
            "keeping_up": (keeping_up, _measure(spark, keeping_up, 8, epoch_ms=3000))}


def _run_with(dag: dict[str, Any], epochs: list[dict[str, Any]], make_user) -> Run:
    from webapp.accounts.roles import Role
    from webapp.jobs.services import job_create

    editor = make_user(Role.EDITOR, name=f"author-{uuid.uuid4().hex[:6]}")
    version = job_create(dag=copy.deepcopy(dag), actor=editor, trigger=Trigger.USER)
    run = Run.objects.create(
        job=version.job, version=version, status=RunStatus.RUNNING, spark_master="local[2]",
        checkpoint_location="/nonexistent", target_dag=version.dag,
        parallelism={op["id"]: 1 for op in dag["operators"]}, current_epoch=len(epochs) - 1)
    for metrics in epochs:
        run_epoch_record(run_id=run.pk, metrics=metrics)
    return run


def _configure(client, run, **body):
    return client.post(
        f"/api/runs/{run.pk}/autoscale", data=json.dumps(body), content_type="application/json"
    )


@pytest.mark.spark
@pytest.mark.django_db
def test_recommend_then_auto_on_a_run_that_falls_behind(
    measured, token_client, make_user, django_capture_on_commit_callbacks
):
    dag, epochs = measured["behind"]
    run = _run_with(dag, epochs, make_user)
    client = token_client("operator")
    assert _configure(client, run, mode="recommend", max=2, cooldown_s=300).status_code == 200
    with django_capture_on_commit_callbacks(execute=False) as published:
        autoscale_evaluate()
    assert len(published) == 1  # the new proposal goes out live
    run.refresh_from_db()
    proposal = run.autoscale_proposal
    assert proposal["action"] == "up" and proposal["changes"]["counts"] == 2
    assert "rows/s demanded" in proposal["reasons"]["counts"]
    counts = proposal["figures"]["units"]["counts"]
    assert counts["demand_rate"] > 1.2 * counts["capacity"]
    assert Reconfiguration.objects.count() == 0
    shown = client.get(f"/api/runs/{run.pk}").json()["autoscale"]["proposal"]
    assert shown["changes"] == proposal["changes"]

    _configure(client, run, mode="auto", max=2, cooldown_s=300)
    with django_capture_on_commit_callbacks(execute=False):
        autoscale_evaluate()
    record = Reconfiguration.objects.get(operators=["counts"])
    assert record.trigger == "policy" and record.actor is None
    assert [o["parallelism"] for o in record.plan_after["operators"] if o["id"] == "counts"] == [2]
    decided = AuditEntry.objects.get(action="autoscale.decided")
    assert decided.details["figures"]["units"]["counts"]["congested"] is True
    assert decided.details["figures"]["sources"]["events"]["backlog"] > 0
    autoscale_evaluate()  # the change is still pending: the loop waits for it
    run.refresh_from_db()
    assert run.autoscale_proposal["action"] == "wait"
    assert Reconfiguration.objects.count() == len(proposal["changes"])


@pytest.mark.spark
@pytest.mark.django_db
@pytest.mark.parametrize(("session_ran_before", "action"), [(0, "wait"), (3, "up")])
def test_a_drivers_start_up_epochs_are_not_judged(measured, token_client, make_user,
                                                  session_ran_before, action):
    """A new driver's session: its first 3 epochs are not judged, and 2 left are too few. A
    warm standby's session ran 3 epochs of its own first: only the run's first one is not
    judged, and epochs 1 to 4 show the run behind."""
    dag, epochs = measured["behind"]
    assert any(e["operators"]["counts"]["congested"] for e in epochs[:5])  # behind already
    recorded = [{**e, "session_epoch": e["driver_epoch"] + session_ran_before}
                for e in copy.deepcopy(epochs[:5])]  # the driver's epochs 0 to 4
    run = _run_with(dag, recorded, make_user)
    _configure(token_client("operator"), run, mode="auto", max=2)
    autoscale_evaluate()
    run.refresh_from_db()
    assert run.autoscale_proposal["action"] == action
    if action == "wait":
        assert "start-up" in run.autoscale_proposal["note"]
        assert Reconfiguration.objects.count() == 0


@pytest.mark.spark
@pytest.mark.django_db
def test_a_run_that_keeps_up_is_never_scaled_up(measured, token_client, make_user):
    dag, epochs = measured["keeping_up"]
    run = _run_with(dag, epochs, make_user)
    _configure(token_client("operator"), run, mode="auto", max=2)
    autoscale_evaluate()
    run.refresh_from_db()
    assert run.autoscale_proposal["action"] == "hold", (run.autoscale_proposal, [
        (e["epoch"], e["batch_duration_ms"], e.get("backlog_rows")) for e in epochs])
    assert run.autoscale_proposal["changes"] == {}
    assert Reconfiguration.objects.count() == 0


def _calm(run: Run, epochs: range) -> None:
    """Epochs 1 s apart in which the operators are busy a fifth of each second."""
    from tests.webapp.conftest import epoch_metrics

    for epoch in epochs:
        metrics = epoch_metrics(epoch, counts_in=1000, counts_capacity=10_000)
        metrics["interval_ms"] = 1000.0
        metrics["operators"]["counts"]["busy_ms"] = [100.0, 100.0]
        run_epoch_record(run_id=run.pk, metrics=metrics)


def _proposal(run: Run) -> dict[str, Any]:
    autoscale_evaluate()
    run.refresh_from_db()
    return run.autoscale_proposal


@pytest.mark.django_db
def test_a_calm_run_is_scaled_down_after_the_window_unless_it_undoes_the_last_change(
    token_client, live_run
):
    from webapp.audit.services import audit_record

    _configure(token_client("operator"), live_run, mode="recommend")
    _calm(live_run, range(250))
    held = _proposal(live_run)
    assert held["action"] == "hold"
    assert "calm for 250 s of the 300 s a scale-down needs" in held["note"]
    _calm(live_run, range(250, 310))
    down = _proposal(live_run)
    assert down["action"] == "down" and down["changes"] == {"counts": 1}
    assert "measured busy time" in down["reasons"]["counts"]
    audit_record(actor=None, trigger=Trigger.POLICY, action="autoscale.decided",
                 subject=live_run, outcome="up", details={})
    undoing = _proposal(live_run)
    assert undoing["action"] == "hold" and undoing["changes"] == {}
    assert "the scale up 0 s ago is not undone within 300 s" in undoing["note"]


@pytest.mark.django_db
def test_no_decision_until_a_window_of_epochs_is_measured(token_client, live_run):
    _configure(token_client("operator"), live_run, mode="auto")
    autoscale_evaluate()
    live_run.refresh_from_db()
    assert live_run.autoscale_proposal["changes"] == {}
    assert "measuring" in live_run.autoscale_proposal["note"]


@pytest.mark.django_db
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
