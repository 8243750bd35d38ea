"""Resume, upgrade and discard of a stopped run's kept state, through the API and the run
page: who may, which runs may, and which versions may start from the state (the rule of live
logic changes). A real run stopped and resumed on Spark is in ``test_run_resume_spark``."""

from __future__ import annotations

import copy
import json

import pytest

from webapp.accounts.roles import Role


@pytest.fixture
def stopped_run(live_run, tmp_path):
    """``live_run`` stopped, with a checkpoint kept under ``tmp_path``."""
    from webapp.jobs.models import Run, RunStatus

    checkpoint = tmp_path / "runs" / str(live_run.pk) / "checkpoint"
    (checkpoint / "epochs").mkdir(parents=True)
    (checkpoint / "run.json").write_text(json.dumps({"run_id": str(live_run.pk),
                                                     "start_ms": 0}))
    Run.objects.filter(pk=live_run.pk).update(status=RunStatus.STOPPED,
                                              checkpoint_location=str(checkpoint))
    live_run.refresh_from_db()
    return live_run


def _new_version(run, counts_params: dict) -> int:
    from webapp.jobs.models import Trigger
    from webapp.jobs.services import job_version_create

    dag = copy.deepcopy(run.version.dag)
    counts = next(op for op in dag["operators"] if op["id"] == "counts")
    counts["params"] = {**counts["params"], **counts_params}
    return job_version_create(job_id=run.job_id, dag=dag, base_version=run.version.number,
                              actor=None, trigger=Trigger.USER).number


def _post(client, path: str, body: dict | None = None):
    return client.post(path, data=json.dumps(body or {}), content_type="application/json")


@pytest.mark.django_db
def test_only_a_stopped_or_failed_run_resumes_and_only_for_operators(
        token_client, live_run) -> None:
    refused = _post(token_client(Role.OPERATOR), f"/api/runs/{live_run.pk}/resume")
    assert refused.status_code == 409
    assert refused.json()["error"] == (f"run {live_run.pk} is running: only a stopped or "
                                       "failed run can be resumed")
    assert _post(token_client(Role.VIEWER), f"/api/runs/{live_run.pk}/resume").status_code == 403


@pytest.mark.django_db
def test_a_stopped_run_shows_its_kept_state_and_resumes_on_its_version(
        token_client, stopped_run) -> None:
    from webapp.audit.models import AuditEntry
    from webapp.jobs.models import Run

    api = token_client(Role.OPERATOR)
    shown = api.get(f"/api/runs/{stopped_run.pk}").json()
    assert shown["state"] == {"kept": True, "bytes": 0, "entries": 0, "key_groups": 0,
                              "discarded_at": None}
    resumed = _post(api, f"/api/runs/{stopped_run.pk}/resume")
    assert resumed.status_code == 202, resumed.content
    assert resumed.json() == {"run_id": stopped_run.pk, "status": "starting"}
    run = Run.objects.get(pk=stopped_run.pk)
    assert run.stopped_at is None and run.restarts == 0
    entry = AuditEntry.objects.filter(run_id_ref=run.pk, action="run.resumed").get()
    assert entry.actor_name == "operator-token" and entry.details["version"] == 1


@pytest.mark.django_db
def test_an_upgrade_that_would_misplace_state_is_refused_naming_the_parameter(
        token_client, stopped_run) -> None:
    from webapp.jobs.models import Run

    version = _new_version(stopped_run, {"key": ["user_id"]})
    refused = _post(token_client(Role.OPERATOR), f"/api/runs/{stopped_run.pk}/resume",
                    {"version": version})
    assert refused.status_code == 409
    assert refused.json()["problems"] == [{
        "where": "operator counts",
        "message": "param key changed: changing the key would misplace stored state across "
                   "key groups"}]
    assert Run.objects.get(pk=stopped_run.pk).status == "stopped"


@pytest.mark.django_db
def test_a_state_safe_version_starts_from_the_state(token_client, stopped_run) -> None:
    from webapp.audit.models import AuditEntry
    from webapp.jobs.models import Run

    version = _new_version(stopped_run, {"watermark": "7 seconds"})
    answer = _post(token_client(Role.OPERATOR), f"/api/runs/{stopped_run.pk}/resume",
                   {"version": version})
    assert answer.status_code == 202, answer.content
    run = Run.objects.get(pk=stopped_run.pk)
    assert run.version.number == version and run.status == "starting"
    assert run.target_dag == run.version.dag
    entry = AuditEntry.objects.filter(run_id_ref=run.pk, action="run.upgraded").get()
    assert (entry.details["from_version"], entry.details["version"]) == (1, version)


@pytest.mark.django_db
def test_a_discarded_state_is_gone_and_cannot_be_resumed(token_client, stopped_run) -> None:
    from pathlib import Path

    from webapp.audit.models import AuditEntry

    api = token_client(Role.OPERATOR)
    assert token_client(Role.VIEWER).delete(f"/api/runs/{stopped_run.pk}/state").status_code == 403
    discarded = api.delete(f"/api/runs/{stopped_run.pk}/state")
    assert discarded.status_code == 200, discarded.content
    assert discarded.json()["kept"] is False
    assert not Path(stopped_run.checkpoint_location).exists()
    assert api.get(f"/api/runs/{stopped_run.pk}").json()["state"]["kept"] is False
    refused = _post(api, f"/api/runs/{stopped_run.pk}/resume")
    assert refused.status_code == 409
    assert "cannot be resumed: its state was discarded at" in refused.json()["error"]
    assert api.delete(f"/api/runs/{stopped_run.pk}/state").status_code == 409
    assert AuditEntry.objects.filter(run_id_ref=stopped_run.pk,
                                     action="run.state_discarded").count() == 1


@pytest.mark.django_db
def test_a_running_runs_state_cannot_be_discarded(token_client, live_run) -> None:
    refused = token_client(Role.OPERATOR).delete(f"/api/runs/{live_run.pk}/state")
    assert refused.status_code == 409
    assert refused.json()["error"] == (f"run {live_run.pk} is running: its state is in use; "
                                       "stop it first")


@pytest.mark.django_db
def test_the_run_page_offers_resume_and_discard_to_operators_only(
        session_client, stopped_run) -> None:
    operator = session_client(Role.OPERATOR).get(f"/runs/{stopped_run.pk}/").content.decode()
    assert 'id="run-state"' in operator and 'id="resume-run"' in operator
    assert 'id="discard-state"' in operator
    viewer = session_client(Role.VIEWER).get(f"/runs/{stopped_run.pk}/").content.decode()
    assert 'id="run-state"' in viewer and 'id="resume-run"' not in viewer


@pytest.mark.django_db
def test_the_page_resume_reloads_the_run_and_a_refusal_stays_in_the_panel(
        session_client, stopped_run) -> None:
    page = session_client(Role.OPERATOR)
    version = _new_version(stopped_run, {"aggregates": {"views": "sum(amount)"}})
    refused = page.post(f"/runs/{stopped_run.pk}/resume", {"version": version},
                        HTTP_HX_REQUEST="true")
    assert refused.status_code == 200
    assert "param aggregates changed" in refused.content.decode()
    resumed = page.post(f"/runs/{stopped_run.pk}/resume", {"version": 1},
                        HTTP_HX_REQUEST="true")
    assert resumed["HX-Redirect"] == f"/runs/{stopped_run.pk}/"
