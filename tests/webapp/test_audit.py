"""The audit trail is append-only in the database; only the retention prune removes entries."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.utils import InternalError
from django.utils import timezone

from webapp.audit.models import AuditEntry
from webapp.audit.services import audit_prune, audit_record

pytestmark = pytest.mark.django_db


def _entry(**extra) -> AuditEntry:
    return audit_record(actor=None, trigger="policy", action="test.entry", **extra)


def _age(entry: AuditEntry, days: int) -> None:
    # Ageing an entry is itself an update, so it goes through the prune switch.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER audit_entry_append_only")
        cursor.execute("UPDATE audit_auditentry SET at = %s WHERE id = %s",
                       [timezone.now() - timedelta(days=days), entry.pk])
        cursor.execute("ALTER TABLE audit_auditentry ENABLE TRIGGER audit_entry_append_only")


@pytest.mark.parametrize("statement", ["UPDATE audit_auditentry SET reason = 'x'",
                                       "DELETE FROM audit_auditentry"])
def test_rows_cannot_be_rewritten_or_removed(statement):
    _entry(reason="original")
    with pytest.raises(InternalError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
    assert AuditEntry.objects.get().reason == "original"


def test_orm_refuses_to_save_an_existing_entry():
    entry = _entry()
    entry.reason = "changed"
    with pytest.raises(ValueError, match="append-only"):
        entry.save()


def test_prune_removes_only_entries_past_retention():
    old, recent = _entry(reason="old"), _entry(reason="recent")
    _age(old, days=400)
    _age(recent, days=10)
    assert audit_prune(retention_days=365) == 1
    assert list(AuditEntry.objects.values_list("reason", flat=True)) == ["recent"]
    assert audit_prune(retention_days=365) == 0


def test_unknown_trigger_is_refused():
    with pytest.raises(ValueError, match="trigger"):
        audit_record(actor=None, trigger="cron", action="x")
