"""Reads on jobs, versions and runs."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from webapp import engine_gateway
from webapp.errors import NotFound
from webapp.jobs.models import ACTIVE_RUN_STATUSES, Job, JobVersion, Run, RunStatus


def job_list(*, name: str = "") -> QuerySet:
    """Jobs by name; with ``name``, those whose name contains it (any case)."""
    jobs = Job.objects.order_by("name")
    return jobs.filter(name__icontains=name) if name else jobs


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
    return list(job.runs.select_related("version").order_by("-created_at")[:limit])


def job_as_json(job: Job) -> dict[str, Any]:
    run = job_current_run(job=job)
    return {
        "id": job.pk,
        "name": job.name,
        "latest_version": job.latest_version,
        "created_at": job.created_at.isoformat(),
        "versions": [
            {
                "number": v.number,
                "author": v.author.username if v.author else None,
                "created_at": v.created_at.isoformat(),
                "comment": v.comment,
                "dag": engine_gateway.dag_shown(v.dag),
            }
            for v in job.versions.select_related("author").order_by("number")
        ],
        "current_run": None if run is None else {"id": run.pk, "status": run.status},
    }
