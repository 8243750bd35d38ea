"""Reads on the audit trail."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet

from webapp.audit.models import AuditEntry


@dataclass(frozen=True)
class AuditFilter:
    job_id: int | None = None
    actor: str | None = None
    action: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    outcome: str | None = None


def audit_entries(
    *, filters: AuditFilter = AuditFilter(), limit: int | None = 200
) -> QuerySet:
    """Entries newest first, narrowed by the filter (all of them with ``limit=None``)."""
    entries = audit_entries_narrowed(entries=AuditEntry.objects.all(), filters=filters)
    entries = entries.order_by("-at", "-id")
    return entries if limit is None else entries[:limit]


def audit_entries_narrowed(
    *, entries: QuerySet, filters: AuditFilter, outcome_field: str = "outcome"
) -> QuerySet:
    """``entries`` narrowed by the filter; the outcome is matched on ``outcome_field`` (e.g. an
    annotation holding the outcome as it is now)."""
    if filters.job_id is not None:
        entries = entries.filter(job_id=filters.job_id)
    if filters.actor:
        entries = entries.filter(actor_name=filters.actor)
    if filters.action:
        entries = entries.filter(action__startswith=filters.action)
    if filters.since is not None:
        entries = entries.filter(at__gte=filters.since)
    if filters.until is not None:
        entries = entries.filter(at__lt=filters.until)
    if filters.outcome:
        entries = entries.filter(**{outcome_field: filters.outcome})
    return entries


def audit_entry_as_json(entry: AuditEntry) -> dict:
    return {
        "id": entry.pk,
        "at": entry.at.isoformat(),
        "actor": entry.actor_name,
        "trigger": entry.trigger,
        "action": entry.action,
        "job": entry.job_id,
        "run": entry.run_id_ref,
        "reconfiguration": entry.reconfiguration_id_ref,
        "reason": entry.reason,
        "outcome": entry.outcome,
        "plan_diff": entry.plan_diff,
        "details": entry.details,
    }
