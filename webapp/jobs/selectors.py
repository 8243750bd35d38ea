"""Reads on jobs, versions and runs."""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery

from webapp import engine_gateway
from webapp.errors import NotFound, ServiceError
from webapp.jobs.models import (
    ACTIVE_RUN_STATUSES,
    Job,
    JobVersion,
    Run,
    RunStatus,
    SinkTarget,
)
from webapp.written_once import version_answers

# What the job list filters on: whether a run is going, and the archive.
JOB_STATUSES = {"running": "running", "idle": "not running", "failed": "last run failed"}
JOB_ARCHIVE = {"hide": "hidden", "include": "shown too", "only": "only archived"}
MAX_SEARCH = 200  # as a job's name


def job_list(*, archived: str = "hide") -> QuerySet:
    """Jobs by name; ``archived``: one of JOB_ARCHIVE (archived jobs hidden by default)."""
    return _in_archive(Job.objects.order_by("name"), archived)


def job_search(*, text: str = "", status: str = "", archived: str = "hide") -> QuerySet:
    """Jobs by name whose name contains ``text`` (any case); ``status``: "running" (a run is
    going), "failed" (none is and the last one failed), "idle" (none is and the last did not
    fail, or there was none), "" for any; ``archived``: one of JOB_ARCHIVE."""
    if len(text) > MAX_SEARCH:
        raise _bad_filter("q", f"is {len(text)} characters long: at most {MAX_SEARCH}")
    if status and status not in JOB_STATUSES:
        raise _bad_filter("state", "must be one of " + ", ".join(JOB_STATUSES) + " (or empty)")
    runs = Run.objects.filter(job=OuterRef("pk"))
    jobs = Job.objects.annotate(
        has_active_run=Exists(runs.filter(status__in=ACTIVE_RUN_STATUSES)),
        last_run_status=Subquery(runs.order_by("-created_at", "-id").values("status")[:1]),
    ).order_by("name")
    if text:
        jobs = jobs.filter(name__icontains=text)
    jobs = _in_archive(jobs, archived)
    failed = Q(last_run_status=RunStatus.FAILED)
    if status == "running":
        jobs = jobs.filter(has_active_run=True)
    elif status == "failed":
        jobs = jobs.filter(failed, has_active_run=False)
    elif status == "idle":
        jobs = jobs.filter(Q(last_run_status__isnull=True) | ~failed, has_active_run=False)
    return jobs


def _in_archive(jobs: QuerySet, archived: str) -> QuerySet:
    """``jobs`` filtered on the archive: "hide" the archived ones, "include" them, or "only"
    them."""
    if archived not in JOB_ARCHIVE:
        raise _bad_filter("archived", "must be one of " + ", ".join(JOB_ARCHIVE))
    if archived == "include":
        return jobs
    return jobs.filter(archived_at__isnull=archived == "hide")


def _bad_filter(field: str, message: str) -> ServiceError:
    return ServiceError(f"the filter {field} {message}",
                        problems=[{"where": f"filter {field}", "message": message}])


def job_get(*, job_id: int) -> Job:
    try:
        return Job.objects.get(pk=job_id)
    except Job.DoesNotExist:
        raise NotFound(f"there is no job {job_id}") from None


def job_version_get(*, job: Job, number: int | None = None) -> JobVersion:
    number = job.latest_version if number is None else number
    version = job.versions.filter(number=number).first()
    if version is None:
        raise NotFound(f"job {job.pk} has no version {number}")
    return version


def job_current_run(*, job: Job) -> Run | None:
    return job.runs.filter(status__in=ACTIVE_RUN_STATUSES).order_by("-created_at").first()


def job_shown_run(*, job: Job) -> Run | None:
    """The run a job's summary names: its active run, else its last run if that failed (so
    a failure reads as one, not as "not running")."""
    current = job_current_run(job=job)
    if current is not None:
        return current
    last = job.runs.order_by("-created_at", "-id").first()
    return last if last is not None and last.status == RunStatus.FAILED else None


def job_runs(*, job: Job, limit: int = 20) -> list[Run]:
    """The job's latest runs, past and present, newest first."""
    return list(job_run_list(job=job)[:limit])


def job_run_list(*, job: Job) -> QuerySet:
    """All the job's runs, past and present, newest first."""
    return job.runs.select_related("version").order_by("-created_at", "-id")


def job_summary_as_json(job: Job) -> dict[str, Any]:
    """A job as the job list answers it."""
    return {
        "id": job.pk,
        "name": job.name,
        "latest_version": job.latest_version,
        "archived_at": job.archived_at.isoformat() if job.archived_at else None,
    }


def job_with_current_run(*, job_id: int) -> Job:
    """The job with ``current_run_id`` and ``current_run_status`` (None when no run is
    going), read in one query: ``GET /api/jobs/{id}`` asks for it many times a second."""
    found = list(Job.objects.raw(_JOB_WITH_CURRENT_RUN_SQL, [list(ACTIVE_RUN_STATUSES), job_id]))
    if not found:
        raise NotFound(f"there is no job {job_id}")
    return found[0]


_JOB_WITH_CURRENT_RUN_SQL = (
    f'SELECT j.*, r.id AS current_run_id, r.status AS current_run_status '
    f'FROM "{Job._meta.db_table}" j LEFT JOIN LATERAL ('
    f'SELECT id, status FROM "{Run._meta.db_table}" WHERE job_id = j.id AND status = ANY(%s) '
    "ORDER BY created_at DESC LIMIT 1) r ON true WHERE j.id = %s"
)


def job_as_json(job: Job) -> dict[str, Any]:
    """``job``: as ``job_with_current_run`` reads it."""
    run_id = job.current_run_id  # type: ignore[attr-defined]
    return {
        **job_summary_as_json(job),
        "created_at": job.created_at.isoformat(),
        "versions": job_versions_as_json(job=job),
        "current_run": None if run_id is None else {
            "id": run_id, "status": job.current_run_status},  # type: ignore[attr-defined]
    }


def job_versions_as_json(*, job: Job) -> list[dict[str, Any]]:
    """The job's versions, oldest first. Versions are immutable and numbered in order, so
    the list is kept per process until the job's latest version changes."""
    return version_answers.get((job.pk, job.created_at, job.latest_version), lambda: [
        {
            "number": v.number,
            "author": v.author.username if v.author else None,
            "created_at": v.created_at.isoformat(),
            "comment": v.comment,
            "dag": engine_gateway.dag_shown(v.dag),
        }
        for v in job.versions.select_related("author").order_by("number")
    ])


def sink_target_list() -> QuerySet:
    """Every owned sink target with its owner job."""
    return SinkTarget.objects.select_related("job").order_by("kind", "name")


def sink_target_overlapping(*, target: engine_gateway.SinkTarget) -> list[SinkTarget]:
    """The owned targets that ``target`` would write over: the same table or its staging
    table (either way round), or the same folder, one inside it or one around it."""
    if target.kind == "table":
        names = set(target.touches())
        names.add(target.name.removesuffix(engine_gateway.STAGING_SUFFIX))
        near = Q(name__in=names)
    else:
        parts = target.name.split("/")
        ancestors = {"/".join(parts[:i]) for i in range(1, len(parts))} | {".", target.name}
        near = Q(name__in=ancestors) | Q(name__startswith=target.name.rstrip("/") + "/")
        if target.name == ".":
            near = Q()
    candidates = SinkTarget.objects.select_related("job").filter(near, kind=target.kind)
    return [row for row in candidates
            if target.overlaps(engine_gateway.SinkTarget(row.kind, row.name))]


def sink_target_as_json(target: SinkTarget) -> dict[str, Any]:
    return {"kind": target.kind, "name": target.name, "job": target.job_id,
            "job_name": target.job.name, "claimed_at": target.claimed_at.isoformat()}
