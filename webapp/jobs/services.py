"""Writes on jobs and versions. Each change is one transaction with its audit entry; live events
go out after commit."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from webapp.audit.services import audit_record
from webapp.engine_gateway import dag_normalized, dag_problems, dag_with_secrets
from webapp.errors import Conflict, NotFound, ServiceError
from webapp.jobs.models import Job, JobVersion
from webapp.live.events import job_event_publish


def job_create(*, dag: Any, actor, trigger: str, comment: str = "") -> JobVersion:
    """Create a job from a DAG document as its version 1."""
    _check_comment(comment)
    document = _valid_document(dag)
    try:
        with transaction.atomic():
            job = Job.objects.create(name=document["name"], created_by=actor, latest_version=1)
            version = JobVersion.objects.create(
                job=job, number=1, dag=document, author=actor, comment=comment
            )
            audit_record(
                actor=actor, trigger=trigger, action="job.created", job=job, outcome="done",
                reason=comment, details={"version": 1},
            )
    except IntegrityError:
        raise Conflict(f"a job named {document['name']!r} already exists") from None
    return version


def job_version_create(
    *, job_id: int, dag: Any, base_version: Any, actor, trigger: str, comment: str = ""
) -> JobVersion:
    """Add a version on top of `base_version`; refuse with 409 if someone saved meanwhile."""
    if not isinstance(base_version, int) or isinstance(base_version, bool):
        raise ServiceError("base_version must be the version number the edit started from")
    _check_comment(comment)
    document = _valid_document(dag)
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            raise NotFound(f"there is no job {job_id}")
        if base_version != job.latest_version:
            raise Conflict(
                f"version {job.latest_version} was saved after version {base_version}: "
                "reload, merge and save again"
            )
        previous = job.versions.get(number=job.latest_version)
        document = dag_with_secrets(document, previous.dag)
        _check_fixed_fields(previous.dag, document)
        version = JobVersion.objects.create(
            job=job, number=base_version + 1, dag=document, author=actor, comment=comment
        )
        job.latest_version = version.number
        job.save(update_fields=["latest_version", "updated_at"])
        audit_record(
            actor=actor, trigger=trigger, action="job.version_created", job=job, outcome="done",
            reason=comment, details={"version": version.number, "base_version": base_version},
        )
        job_event_publish(
            job_id=job.pk,
            event={
                "type": "job.version_created", "job": job.pk, "version": version.number,
                "author": actor.username if actor else None, "comment": comment,
            },
        )
    return version


MAX_COMMENT = 2000


def _check_comment(comment: Any) -> None:
    if not isinstance(comment, str) or len(comment) > MAX_COMMENT or "\x00" in comment:
        raise ServiceError(f"the comment must be text of at most {MAX_COMMENT} characters",
                           problems=[{"where": "field comment",
                                      "message": f"must be at most {MAX_COMMENT} characters"}])


def _valid_document(dag: Any) -> dict[str, Any]:
    problems = dag_problems(dag)
    if problems:
        raise ServiceError(f"the job graph has {len(problems)} problem(s)", problems=problems)
    return dag_normalized(dag)


def _check_fixed_fields(previous: dict[str, Any], document: dict[str, Any]) -> None:
    for field in ("name", "key_groups"):
        if previous.get(field) != document.get(field):
            raise ServiceError(
                f"{field} is fixed for the life of a job: keep {previous.get(field)!r}",
                problems=[{"where": field, "message": f"must stay {previous.get(field)!r}"}],
            )
