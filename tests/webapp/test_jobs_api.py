"""Jobs and versions through the API: creation, validation errors, optimistic locking, history."""

from __future__ import annotations

import json

import pytest

from webapp.accounts.roles import Role
from webapp.audit.models import AuditEntry
from webapp.jobs.models import Job, JobVersion

pytestmark = pytest.mark.django_db


def _post(client, path, body):
    return client.post(path, data=json.dumps(body), content_type="application/json")


def test_create_job_then_read_it(token_client, simple_dag):
    client = token_client(Role.EDITOR)
    created = _post(client, "/api/jobs", simple_dag)
    assert created.status_code == 201
    job_id = created.json()["id"]
    assert created.json()["version"] == 1
    job = client.get(f"/api/jobs/{job_id}").json()
    assert job["name"] == "clicks"
    assert [v["number"] for v in job["versions"]] == [1]
    assert job["versions"][0]["dag"]["operators"][1]["id"] == "clicks"
    assert job["current_run"] is None


def test_invalid_dag_lists_every_problem_and_stores_nothing(token_client, simple_dag):
    simple_dag["operators"].append({"id": "Bad-Id", "type": "nope", "params": {}})
    simple_dag["edges"].append({"from": "out", "to": "ghost"})
    response = _post(token_client(Role.EDITOR), "/api/jobs", simple_dag)
    assert response.status_code == 400
    problems = response.json()["problems"]
    text = " ".join(p["where"] + " " + p["message"] for p in problems)
    assert len(problems) >= 2
    assert "Bad-Id" in text and "ghost" in text
    assert Job.objects.count() == 0 and AuditEntry.objects.count() == 0


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b""])
def test_bad_bodies_get_400(token_client, body):
    response = token_client(Role.EDITOR).post(
        "/api/jobs", data=body, content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["error"]


def test_duplicate_job_name_is_a_conflict(token_client, simple_dag):
    client = token_client(Role.EDITOR)
    assert _post(client, "/api/jobs", simple_dag).status_code == 201
    again = _post(client, "/api/jobs", simple_dag)
    assert again.status_code == 409 and "clicks" in again.json()["error"]
    assert Job.objects.count() == 1


def test_versions_are_numbered_and_stale_base_is_refused(token_client, job, simple_dag):
    client = token_client(Role.EDITOR)
    simple_dag["operators"][1]["params"]["condition"] = "event_type = 'view'"
    first = _post(
        client,
        f"/api/jobs/{job.pk}/versions",
        {"dag": simple_dag, "base_version": 1, "comment": "views instead"},
    )
    assert first.status_code == 201 and first.json()["version"] == 2
    stale = _post(client, f"/api/jobs/{job.pk}/versions", {"dag": simple_dag, "base_version": 1})
    assert stale.status_code == 409
    assert "version 2" in stale.json()["error"]
    assert list(JobVersion.objects.filter(job=job).values_list("number", flat=True)) == [2, 1]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"base_version": 1}, "dag"),
        ({"dag": {}, "base_version": "1"}, "base_version"),
        ({"dag": [], "base_version": 1}, "dag"),
    ],
)
def test_version_body_errors_name_the_field(token_client, job, body, field):
    response = _post(token_client(Role.EDITOR), f"/api/jobs/{job.pk}/versions", body)
    assert response.status_code == 400
    assert field in response.json()["error"]


def test_name_and_key_groups_are_fixed(token_client, job, simple_dag):
    simple_dag["key_groups"] = 32
    response = _post(
        token_client(Role.EDITOR),
        f"/api/jobs/{job.pk}/versions",
        {"dag": simple_dag, "base_version": 1},
    )
    assert response.status_code == 400 and "key_groups" in response.json()["error"]


def test_unknown_job_is_404(token_client):
    assert token_client(Role.VIEWER).get("/api/jobs/999999").status_code == 404


def test_versions_are_immutable_in_the_database(job):
    from django.db import connection, transaction
    from django.db.utils import InternalError

    with pytest.raises(InternalError, match="immutable"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "UPDATE jobs_jobversion SET comment = 'rewritten' WHERE job_id = %s", [job.pk]
            )


def test_history_lists_changes_with_actor_and_trigger(token_client, job, simple_dag):
    client = token_client(Role.EDITOR)
    _post(
        client,
        f"/api/jobs/{job.pk}/versions",
        {"dag": simple_dag, "base_version": 1, "comment": "same again"},
    )
    entries = token_client(Role.VIEWER).get(f"/api/jobs/{job.pk}/history").json()["entries"]
    assert [e["action"] for e in entries] == ["job.version_created", "job.created"]
    assert entries[0]["actor"] == "editor-token" and entries[0]["trigger"] == "api_token"
    assert entries[0]["reason"] == "same again"
    assert entries[1]["actor"] == "job-author" and entries[1]["trigger"] == "user"


def test_openapi_document_lists_the_endpoints(client):
    paths = client.get("/api/schema").json()["paths"]
    assert {
        "/api/jobs",
        "/api/jobs/{id}",
        "/api/jobs/{id}/versions",
        "/api/jobs/{id}/history",
    } <= set(paths)


def test_a_document_reads_in_order_whatever_order_the_store_keeps(token_client, simple_dag):
    """PostgreSQL's jsonb gives keys back shortest first ("to" before "from"); the API and the
    job page show them in reading order."""
    client = token_client(Role.EDITOR)
    job_id = _post(client, "/api/jobs", simple_dag).json()["id"]
    stored = JobVersion.objects.get(job_id=job_id).dag
    assert list(stored["edges"][0]) == ["to", "from"]  # what the store gives back
    dag = client.get(f"/api/jobs/{job_id}").json()["versions"][0]["dag"]
    assert list(dag)[:4] == ["name", "key_groups", "operators", "edges"]
    assert list(dag["edges"][0]) == ["from", "to"]
    assert list(dag["operators"][0])[:2] == ["id", "type"]
    page = token_client(Role.VIEWER).get(f"/jobs/{job_id}/").content.decode()
    document = page[page.index('<pre class="json">'):]
    edge = document[document.index("&quot;edges&quot;"):]
    assert edge.index("&quot;from&quot;") < edge.index("&quot;to&quot;")
