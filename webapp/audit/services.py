"""Writes on the audit trail."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from webapp.audit.models import AuditEntry
from webapp.jobs.models import Job, Trigger


def audit_record(
    *,
    actor,
    trigger: str,
    action: str,
    job: Job | None = None,
    run_id: int | None = None,
    reconfiguration_id: int | None = None,
    reason: str = "",
    outcome: str = "",
    plan_diff: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
) -> AuditEntry:
    """Append one entry. Call it inside the transaction of the change it records."""
    if trigger not in Trigger.values:
        raise ValueError(f"unknown audit trigger {trigger!r}")
    return AuditEntry.objects.create(
        actor=actor,
        actor_name=actor.username if actor is not None else trigger,
        trigger=trigger,
        action=action,
        job=job,
        job_name=job.name if job is not None else "",
        run_id_ref=run_id,
        reconfiguration_id_ref=reconfiguration_id,
        reason=reason,
        outcome=outcome,
        plan_diff=plan_diff or {},
        details=details or {},
    )


def audit_prune(*, retention_days: int) -> int:
    """Delete entries older than the retention period; the only way entries are ever removed."""
    cutoff = timezone.now() - timedelta(days=retention_days)
    with transaction.atomic():
        with connection.cursor() as cursor:
            # The append-only trigger lets deletes through only while this is set.
            cursor.execute("SET LOCAL streamscale.audit_prune = 'on'")
        deleted, _ = AuditEntry.objects.filter(at__lt=cutoff).delete()
    return deleted
