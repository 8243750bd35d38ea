"""A sink target (a Postgres table with its staging table, a data folder) belongs to the job
that first named it: another job naming it is refused, naming the owner, until an admin hands
it over; the product's own commit table belongs to no job."""

from __future__ import annotations

import copy
import json

import pytest
from django.test import Client

from tests.webapp.conftest import SIMPLE_DAG
from webapp.accounts.roles import Role
from webapp.audit.models import AuditEntry

pytestmark = pytest.mark.django_db


def _dag(name: str, *, table: str | None = None, folder: str | None = None) -> dict:
    dag = copy.deepcopy(SIMPLE_DAG)
    dag["name"] = name
    if table is not None:
        dag["operators"][2] = {"id": "out", "type": "sink.postgres", "params": {"table": table}}
    else:
        dag["operators"][2] = {"id": "out", "type": "sink.files",
                               "params": {"path": folder, "format": "json"}}
    return dag


def _post(client: Client, path: str, body: dict):
    return client.post(path, data=json.dumps(body), content_type="application/json")


@pytest.fixture
def editor(token_client) -> Client:
    return token_client(Role.EDITOR)


def _create(client: Client, dag: dict) -> int:
    answer = _post(client, "/api/jobs", dag)
    assert answer.status_code == 201, answer.content
    return answer.json()["id"]


@pytest.mark.parametrize(("first", "second", "named"), [
    ({"table": "clicks_out"}, {"table": "clicks_out"}, "table 'clicks_out'"),
    ({"table": "clicks_out"}, {"table": "clicks_out__staging"}, "table 'clicks_out__staging'"),
    ({"table": "clicks_out__staging"}, {"table": "clicks_out"}, "table 'clicks_out'"),
    ({"folder": "out/clicks"}, {"folder": "out/clicks"}, "folder 'out/clicks'"),
    ({"folder": "out/clicks"}, {"folder": "./out//clicks/"}, "folder 'out/clicks'"),
    ({"folder": "out/clicks"}, {"folder": "out"}, "folder 'out'"),
    ({"folder": "out/clicks"}, {"folder": "out/clicks/today"}, "folder 'out/clicks/today'"),
])
def test_another_job_naming_an_owned_target_is_refused_naming_the_owner(
    editor, first, second, named
):
    owner = _create(editor, _dag("owner-job", **first))

    answer = _post(editor, "/api/jobs", _dag("intruder-job", **second))

    assert answer.status_code == 409, answer.content
    error = answer.json()["error"]
    assert error.startswith(f"{named} belongs to job 'owner-job' (id {owner}), which writes to ")
    assert "ask an admin to hand it over" in error
    assert answer.json()["problems"][0]["where"] == "operator 'out'"


def test_targets_apart_from_the_owned_ones_are_free(editor):
    _create(editor, _dag("owner-job", folder="out/clicks"))
    _create(editor, _dag("beside-job", folder="out/clicks-2"))
    _create(editor, _dag("table-job", table="out"))  # a table, not the folder


def test_the_owner_keeps_its_target_across_versions(editor):
    job = _create(editor, _dag("owner-job", table="clicks_out"))
    answer = _post(editor, f"/api/jobs/{job}/versions",
                   {"dag": _dag("owner-job", table="clicks_out"), "base_version": 1})
    assert answer.status_code == 201, answer.content


def test_the_commit_table_belongs_to_no_job(editor):
    for table in ("streamscale_sink_commits", "streamscale_sink_commits__staging"):
        answer = _post(editor, "/api/jobs", _dag(f"job-{table}", table=table))
        assert answer.status_code == 409
        assert "is the product's record of sink commits: no job may write to it" in (
            answer.json()["error"])


def test_an_admin_hands_a_target_over_and_the_old_owner_may_no_longer_start(
    editor, token_client
):
    old = _create(editor, _dag("old-owner", table="clicks_out"))
    new = _create(editor, _dag("new-owner", table="other_out"))
    body = {"kind": "table", "name": "clicks_out", "job": new, "reason": "old-owner retired"}

    operator = token_client(Role.OPERATOR)
    refused = _post(operator, "/api/sink-targets/hand-over", body)
    answer = _post(token_client(Role.ADMIN), "/api/sink-targets/hand-over", body)

    assert refused.status_code == 403
    assert answer.status_code == 200, answer.content
    assert answer.json() | {"claimed_at": None} == {
        "kind": "table", "name": "clicks_out", "job": new, "job_name": "new-owner",
        "claimed_at": None}
    saved = _post(editor, f"/api/jobs/{new}/versions",
                  {"dag": _dag("new-owner", table="clicks_out"), "base_version": 1})
    assert saved.status_code == 201, saved.content
    start = _post(operator, f"/api/jobs/{old}/runs", {})
    assert start.status_code == 409
    assert start.json()["error"].startswith(
        f"table 'clicks_out' belongs to job 'new-owner' (id {new})")
    entry = AuditEntry.objects.get(action="sink_target.handed_over")
    assert entry.reason == "old-owner retired"
    listed = token_client(Role.VIEWER).get("/api/sink-targets").json()["targets"]
    assert [(t["kind"], t["name"], t["job_name"]) for t in listed] == [
        ("table", "clicks_out", "new-owner"), ("table", "other_out", "new-owner")]


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"kind": "table", "name": "nobody_owns", "job": 1, "reason": "r"}, 404,
     "no job owns table 'nobody_owns'"),
    ({"kind": "view", "name": "x", "job": 1, "reason": "r"}, 400, "kind"),
    ({"kind": "table", "name": "x", "job": 1, "reason": ""}, 400, "reason"),
    ({"kind": "table", "name": "x", "job": 1, "reason": " \r"}, 400, "reason"),
])
def test_a_hand_over_names_what_is_wrong(token_client, body, status, message):
    answer = _post(token_client(Role.ADMIN), "/api/sink-targets/hand-over", body)
    assert answer.status_code == status
    assert message in answer.json()["error"]


def test_jobs_saved_before_owners_existed_get_their_targets_first_come_first_served(make_user):
    import importlib

    from django.apps import apps

    from webapp.jobs.models import Job, JobVersion, SinkTarget

    migration = importlib.import_module("webapp.jobs.migrations.0013_sink_targets")
    for name, folder in [("older", "out/clicks"), ("newer", "out"), ("apart", "elsewhere")]:
        job = Job.objects.create(name=name, latest_version=1)  # as saved before this change
        JobVersion.objects.create(job=job, number=1, dag=_dag(name, folder=folder))

    migration.claim_existing_targets(apps, None)

    assert [(t.name, t.job.name) for t in SinkTarget.objects.order_by("name")] == [
        ("elsewhere", "apart"), ("out/clicks", "older")]
