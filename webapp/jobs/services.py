"""Writes on jobs and versions. Each change is one transaction with its audit entry; live events
go out after commit."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from webapp.audit.services import audit_record
from webapp.engine_gateway import dag_normalized, dag_problems, dag_with_secrets
from webapp.errors import Conflict, NotFound, ServiceError
from webapp.jobs.models import ACTIVE_RUN_STATUSES, Job, JobVersion
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
                actor=actor, trigger=trigger, action="job.created", subject=job, outcome="done",
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
        job_check_not_archived(job=job, doing="saving a version")
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
            actor=actor, trigger=trigger, action="job.version_created", subject=job,
            outcome="done",
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


def job_archive(*, job_id: int, actor, trigger: str, reason: str = "") -> Job:
    """Archive a job: hidden from the job list by default, neither started nor edited until
    restored. Its versions, runs and audit trail stay. A job with a run going is refused."""
    _check_text(reason, "reason")
    with transaction.atomic():
        job = _locked_job(job_id)
        if job.archived_at is not None:
            raise Conflict(f"job {job.name!r} is already archived")
        active = job.runs.filter(status__in=ACTIVE_RUN_STATUSES).order_by("-created_at").first()
        if active is not None:
            raise Conflict(f"run {active.pk} of job {job.name!r} is {active.status}: stop it "
                           "before archiving the job")
        job.archived_at, job.archived_by = timezone.now(), actor
        job.save(update_fields=["archived_at", "archived_by", "updated_at"])
        audit_record(actor=actor, trigger=trigger, action="job.archived", subject=job,
                     outcome="done", reason=reason)
    return job


def job_restore(*, job_id: int, actor, trigger: str, reason: str = "") -> Job:
    """Take a job out of the archive: listed, startable and editable again."""
    _check_text(reason, "reason")
    with transaction.atomic():
        job = _locked_job(job_id)
        if job.archived_at is None:
            raise Conflict(f"job {job.name!r} is not archived")
        archived_at = job.archived_at
        job.archived_at, job.archived_by = None, None
        job.save(update_fields=["archived_at", "archived_by", "updated_at"])
        audit_record(actor=actor, trigger=trigger, action="job.restored", subject=job,
                     outcome="done", reason=reason,
                     details={"archived_at": archived_at.isoformat()})
    return job


def job_check_not_archived(*, job: Job, doing: str) -> None:
    """Refuse ``doing`` (e.g. "starting a run") on an archived job, saying how to go on."""
    if job.archived_at is not None:
        raise Conflict(f"job {job.name!r} is archived: restore it before {doing}",
                       problems=[{"where": "job", "message": f"is archived: restore it before "
                                                             f"{doing}"}])


def _locked_job(job_id: int) -> Job:
    job = Job.objects.select_for_update().filter(pk=job_id).first()
    if job is None:
        raise NotFound(f"there is no job {job_id}")
    return job


MAX_COMMENT = 2000


def _check_comment(comment: Any) -> None:
    _check_text(comment, "comment")


def _check_text(text: Any, field: str) -> None:
    if not isinstance(text, str) or len(text) > MAX_COMMENT or "\x00" in text:
        raise ServiceError(f"the {field} must be text of at most {MAX_COMMENT} characters",
                           problems=[{"where": f"field {field}",
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
