"""Writes on jobs and versions. Each change is one transaction with its audit entry; live events
go out after commit."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from webapp import engine_gateway
from webapp.audit.services import audit_record
from webapp.engine_gateway import dag_normalized, dag_problems, dag_with_secrets
from webapp.errors import Conflict, NotFound, ServiceError
from webapp.jobs.models import ACTIVE_RUN_STATUSES, Job, JobVersion, SinkTarget
from webapp.jobs.selectors import sink_target_overlapping
from webapp.jobs.validations import validation_slot
from webapp.live.events import job_event_publish


def job_create(*, dag: Any, actor, trigger: str, comment: str = "") -> JobVersion:
    """Create a job from a DAG document as its version 1."""
    _check_comment(comment)
    name = dag.get("name") if isinstance(dag, dict) else None
    if isinstance(name, str) and Job.objects.filter(name=name).exists():
        # Answered before the document is checked, which can take seconds.
        raise Conflict(f"a job named {name!r} already exists")
    document = _valid_document(dag, actor)
    try:
        with transaction.atomic():
            job = Job.objects.create(name=document["name"], created_by=actor, latest_version=1)
            job_sink_targets_claim(job=job, document=document)
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
    document = _valid_document(dag, actor)
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
        job_sink_targets_claim(job=job, document=document)
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


def _valid_document(dag: Any, actor) -> dict[str, Any]:
    with validation_slot(user_id=getattr(actor, "pk", None)):
        problems = dag_problems(dag)
        if problems:
            raise ServiceError(f"the job graph has {len(problems)} problem(s)",
                               problems=problems)
        return dag_normalized(dag)


def job_document_check(*, dag: Any, actor) -> dict[str, Any]:
    """The editor's check of a document: every problem, or the plan and columns."""
    with validation_slot(user_id=getattr(actor, "pk", None)):
        return engine_gateway.dag_check(dag)


def _check_fixed_fields(previous: dict[str, Any], document: dict[str, Any]) -> None:
    for field in ("name", "key_groups"):
        if previous.get(field) != document.get(field):
            raise ServiceError(
                f"{field} is fixed for the life of a job: keep {previous.get(field)!r}",
                problems=[{"where": field, "message": f"must stay {previous.get(field)!r}"}],
            )


# One key for every claim: claims are rare (saves and starts), and two jobs claiming
# overlapping targets at once (a folder and one inside it) must not both see them free.
_CLAIMS_LOCK = 0x5157_0001


def job_sink_targets_claim(*, job: Job, document: dict[str, Any]) -> None:
    """Make ``job`` the owner of the tables and folders ``document``'s sinks write to that
    no job owns yet; refuse (409) one another job owns, naming that job, and the product's
    own tables. Call inside the transaction that saves the version or starts the run."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CLAIMS_LOCK])
    problems, new = [], []
    for target in engine_gateway.dag_sink_targets(document):
        reserved = engine_gateway.sink_target_reserved(target)
        rows = sink_target_overlapping(target=target)
        owner = next((row for row in rows if row.job_id != job.pk), None)
        if reserved is not None:
            problems.append(_sink_problem(target, f"{reserved}: no job may write to it"))
        elif owner is not None:
            problems.append(_sink_problem(target, (
                f"{target.label} belongs to job {owner.job.name!r} (id {owner.job_id}), which "
                f"writes to {owner}: choose another, or ask an admin to hand it over")))
        elif not any((row.kind, row.name) == (target.kind, target.name) for row in rows):
            new.append(SinkTarget(job=job, kind=target.kind, name=target.name))
    if problems:
        raise Conflict(problems[0]["message"], problems=problems)
    SinkTarget.objects.bulk_create(new, ignore_conflicts=True)


def _sink_problem(target, message: str) -> dict[str, str]:
    return {"where": f"operator {target.operator!r}", "message": message}


def sink_target_hand_over(
    *, kind: str, name: str, job_id: int, actor, trigger: str, reason: str
) -> SinkTarget:
    """Give an owned sink target to another job (an admin's decision, audited)."""
    _check_text(reason, "reason")
    if not reason.strip():
        raise ServiceError("a reason is required: say why the target changes hands",
                           problems=[{"where": "field reason", "message": "is required"}])
    with transaction.atomic():
        target = SinkTarget.objects.select_for_update().select_related("job").filter(
            kind=kind, name=name).first()
        if target is None:
            raise NotFound(f"no job owns {kind} {name!r}")
        job = Job.objects.filter(pk=job_id).first()
        if job is None:
            raise NotFound(f"there is no job {job_id}")
        previous = target.job
        target.job = job
        target.save(update_fields=["job"])
        audit_record(
            actor=actor, trigger=trigger, action="sink_target.handed_over", subject=job,
            outcome="done", reason=reason,
            details={"kind": kind, "name": name, "from_job": previous.pk, "to_job": job.pk},
        )
    return target
