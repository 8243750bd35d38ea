"""Writes on the audit trail."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from webapp.audit.models import AuditEntry
from webapp.jobs.models import Job, Reconfiguration, Run, Trigger

AuditSubject = Job | Run | Reconfiguration


def audit_record(
    *,
    actor,
    trigger: str,
    action: str,
    subject: AuditSubject | None = None,
    reason: str = "",
    outcome: str = "",
    plan_diff: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
) -> AuditEntry:
    """Append one entry about ``subject``, a job, a run or a reconfiguration, which the entry
    refers to with what it belongs to (a run's job, a reconfiguration's run and job); None for
    what belongs to no job (users). Call it inside the transaction of the change it records."""
    if trigger not in Trigger.values:
        raise ValueError(f"unknown audit trigger {trigger!r}")
    job, run, reconfiguration = _refs_of(subject)
    return AuditEntry.objects.create(
        actor=actor,
        actor_name=actor.username if actor is not None else trigger,
        trigger=trigger,
        action=action,
        job=job,
        job_name=job.name if job is not None else "",
        run_id_ref=run.pk if run is not None else None,
        reconfiguration_id_ref=reconfiguration.pk if reconfiguration is not None else None,
        reason=reason,
        outcome=outcome,
        plan_diff=plan_diff or {},
        details=details or {},
    )


def _refs_of(
    subject: AuditSubject | None,
) -> tuple[Job | None, Run | None, Reconfiguration | None]:
    if isinstance(subject, Reconfiguration):
        return subject.run.job, subject.run, subject
    if isinstance(subject, Run):
        return subject.job, subject, None
    return subject, None, None


def audit_prune(*, retention_days: int) -> int:
    """Delete entries older than the retention period; the only way entries are ever removed."""
    cutoff = timezone.now() - timedelta(days=retention_days)
    with transaction.atomic():
        with connection.cursor() as cursor:
            # The append-only trigger lets deletes through only while this is set.
            cursor.execute("SET LOCAL streamscale.audit_prune = 'on'")
        deleted, _ = AuditEntry.objects.filter(at__lt=cutoff).delete()
    return deleted
