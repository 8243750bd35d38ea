"""Archiving a job: hidden from the list, neither started nor edited until restored, its runs and
audit trail kept, every change audited, a job with a run going refused; the pages offer only
what the server accepts."""

from __future__ import annotations

import json

import pytest

from webapp.accounts.roles import Role

pytestmark = pytest.mark.django_db


def _archive(client, job, *, reason: str = "", archived: str = "1"):
    return client.post(f"/jobs/{job.pk}/archive", {"archived": archived, "reason": reason})


def _run_of(job, status: str):
    from webapp.jobs.models import Run

    return Run.objects.create(job=job, version=job.versions.get(number=1), status=status)


def test_an_editor_archives_a_job_and_it_is_audited_with_the_reason(session_client, job):
    from webapp.audit.models import AuditEntry

    _run_of(job, "stopped")
    response = _archive(session_client(Role.EDITOR), job, reason="replaced by clicks-v2")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    job.refresh_from_db()
    assert job.archived_at is not None and job.archived_by.username == "editor-session"
    entry = AuditEntry.objects.get(action="job.archived")
    assert (entry.job_id, entry.actor_name, entry.reason, entry.outcome) == (
        job.pk, "editor-session", "replaced by clicks-v2", "done")
    # Its versions, runs and earlier audit entries stay.
    assert job.versions.count() == 1 and job.runs.count() == 1
    assert AuditEntry.objects.filter(job=job, action="job.created").exists()


def test_a_job_with_a_run_going_cannot_be_archived(session_client, job):
    from webapp.audit.models import AuditEntry

    run = _run_of(job, "running")
    response = _archive(session_client(Role.ADMIN), job)
    page = response.content.decode()
    assert response.status_code == 409
    assert f"run {run.pk} of job &#x27;clicks&#x27; is running: stop it before archiving" in page
    assert 'aria-label="Main"' in page
    job.refresh_from_db()
    assert job.archived_at is None and not AuditEntry.objects.filter(action="job.archived")


def test_the_job_page_disables_archive_while_a_run_goes_and_says_why(session_client, job):
    run = _run_of(job, "starting")
    page = session_client(Role.EDITOR).get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="job-archive-open" disabled' in page
    assert f"Run {run.pk} is starting: stop it before archiving the job." in page
    assert 'id="job-archive-confirm"' not in page


def test_viewers_are_offered_no_archive_and_are_refused(session_client, job):
    viewer = session_client(Role.VIEWER)
    page = viewer.get(f"/jobs/{job.pk}/").content.decode()
    assert "job-archive" not in page and "job-restore" not in page
    assert _archive(viewer, job).status_code == 403
    job.refresh_from_db()
    assert job.archived_at is None


def test_an_archived_job_is_neither_started_nor_edited(session_client, token_client, job,
                                                        simple_dag):
    from webapp.jobs.models import Run

    editor = session_client(Role.EDITOR)
    assert _archive(editor, job).status_code == 302
    operator = session_client(Role.OPERATOR)
    page = operator.get(f"/jobs/{job.pk}/").content.decode()
    assert "Start v1" not in page and "Archived: restore the job to start it." in page
    assert f'href="/jobs/{job.pk}/edit/' not in page and 'id="job-restore"' in page
    assert 'id="job-archived-note"' in page

    refused = operator.post(f"/jobs/{job.pk}/start", {"version": "1"})
    assert refused.status_code == 409
    assert "is archived: restore it before starting a run" in refused.content.decode()
    api = token_client(Role.OPERATOR).post(f"/api/jobs/{job.pk}/runs", data="{}",
                                           content_type="application/json")
    assert api.status_code == 409
    assert api.json()["error"] == "job 'clicks' is archived: restore it before starting a run"
    assert not Run.objects.filter(job=job).exists()

    edit = editor.get(f"/jobs/{job.pk}/edit/")
    assert edit.status_code == 409 and "restore it before editing it" in edit.content.decode()
    saved = token_client(Role.EDITOR).post(
        f"/api/jobs/{job.pk}/versions", content_type="application/json",
        data=json.dumps({"dag": simple_dag, "base_version": 1}))
    assert saved.status_code == 409 and "restore it before saving a version" in \
        saved.json()["error"]
    job.refresh_from_db()
    assert job.latest_version == 1


def test_a_restored_job_starts_and_is_edited_again(session_client, job):
    from webapp.audit.models import AuditEntry

    editor = session_client(Role.EDITOR)
    _archive(editor, job)
    assert _archive(editor, job, archived="0", reason="needed again").status_code == 302
    job.refresh_from_db()
    assert job.archived_at is None and job.archived_by is None
    restored = AuditEntry.objects.get(action="job.restored")
    assert restored.reason == "needed again" and restored.details["archived_at"]
    assert editor.get(f"/jobs/{job.pk}/edit/").status_code == 200
    started = session_client(Role.OPERATOR).post(f"/jobs/{job.pk}/start", {"version": "1"})
    assert started.status_code == 302 and job.runs.count() == 1


@pytest.mark.parametrize(
    ("archived_first", "archived", "message"),
    [
        (True, "1", "job &#x27;clicks&#x27; is already archived"),
        (False, "0", "job &#x27;clicks&#x27; is not archived"),
        (False, "yes", "the field archived must be 1 (archive) or 0 (restore)"),
    ],
)
def test_archiving_twice_restoring_a_listed_job_or_a_bad_field_is_refused(
    session_client, job, archived_first, archived, message
):
    editor = session_client(Role.EDITOR)
    if archived_first:
        _archive(editor, job)
    response = _archive(editor, job, archived=archived)
    assert response.status_code in (400, 409) and message in response.content.decode()


def test_an_overlong_reason_is_refused_naming_the_field(session_client, job):
    response = _archive(session_client(Role.EDITOR), job, reason="x" * 2001)
    assert response.status_code == 400
    assert "the reason must be text of at most 2000 characters" in response.content.decode()
    job.refresh_from_db()
    assert job.archived_at is None


def test_archiving_a_missing_job_is_404(session_client):
    assert session_client(Role.EDITOR).post("/jobs/999999/archive",
                                            {"archived": "1"}).status_code == 404


def test_the_api_reads_whether_a_job_is_archived(session_client, token_client, job):
    reader = token_client(Role.VIEWER)
    assert reader.get(f"/api/jobs/{job.pk}").json()["archived_at"] is None
    _archive(session_client(Role.EDITOR), job)
    assert reader.get(f"/api/jobs/{job.pk}").json()["archived_at"]


def test_archive_and_restore_services_write_one_audit_entry_each_in_their_transaction(
    make_user, job
):
    from webapp.audit.models import AuditEntry
    from webapp.errors import Conflict
    from webapp.jobs.models import Trigger
    from webapp.jobs.services import job_archive, job_restore

    editor = make_user(Role.EDITOR, name="ed")
    job_archive(job_id=job.pk, actor=editor, trigger=Trigger.API_TOKEN)
    with pytest.raises(Conflict):
        job_archive(job_id=job.pk, actor=editor, trigger=Trigger.API_TOKEN)
    job_restore(job_id=job.pk, actor=editor, trigger=Trigger.API_TOKEN)
    actions = list(AuditEntry.objects.filter(job=job).order_by("id")
                   .values_list("action", "trigger"))
    assert actions == [("job.created", "user"), ("job.archived", "api_token"),
                       ("job.restored", "api_token")]


@pytest.fixture
def archived_and_listed(make_user, simple_dag, job):
    """``job`` listed, and an archived job beside it."""
    from webapp.jobs.models import Trigger
    from webapp.jobs.services import job_archive, job_create

    editor = make_user(Role.EDITOR, name="archivist")
    old = job_create(dag={**simple_dag, "name": "retired"}, actor=editor,
                     trigger=Trigger.USER).job
    job_archive(job_id=old.pk, actor=editor, trigger=Trigger.USER)
    return old, job


@pytest.mark.parametrize(("query", "expected"), [
    ("", ["listed"]),
    ("?archived=hide", ["listed"]),
    ("?archived=include", ["listed", "archived"]),
    ("?archived=only", ["archived"]),
])
def test_the_api_job_list_hides_archived_jobs_unless_asked(token_client, archived_and_listed,
                                                           query, expected):
    archived, listed = archived_and_listed
    by_name = {"listed": listed, "archived": archived}
    answer = token_client(Role.VIEWER).get(f"/api/jobs{query}")
    assert answer.status_code == 200
    jobs = answer.json()["jobs"]
    assert sorted(j["id"] for j in jobs) == sorted(by_name[n].pk for n in expected)
    for entry in jobs:
        assert (entry["archived_at"] is not None) == (entry["id"] == archived.pk)


def test_a_bad_archive_filter_of_the_api_job_list_is_named(token_client):
    answer = token_client(Role.VIEWER).get("/api/jobs?archived=yes")
    assert answer.status_code == 400
    assert answer.json()["problems"][0]["where"] == "query parameter archived"


def test_the_archive_filter_is_in_the_openapi_document(client):
    operation = client.get("/api/schema").json()["paths"]["/api/jobs"]["get"]
    [parameter] = [p for p in operation["parameters"] if p["name"] == "archived"]
    assert parameter["in"] == "query" and not parameter["required"]
    assert parameter["schema"]["enum"] == ["hide", "include", "only"]
    assert parameter["schema"]["default"] == "hide"
    summary = client.get("/api/schema").json()["components"]["schemas"]["JobSummaryOut"]
    assert "archived_at" in summary["properties"]
