"""A task round trip through the real Redis broker and a real worker process."""

from __future__ import annotations

import time

import pytest
from django.db import connection, transaction

from webapp.audit.models import AuditEntry
from webapp.audit.services import audit_record
from webapp.audit.tasks import audit_prune
from webapp.celery import app


@pytest.mark.django_db(transaction=True)
def test_task_runs_in_a_worker_and_is_idempotent(celery_worker_process):
    audit_record(actor=None, trigger="policy", action="test.old")
    audit_record(actor=None, trigger="policy", action="test.new")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER audit_entry_append_only")
        cursor.execute("UPDATE audit_auditentry SET at = now() - interval '30 days' "
                       "WHERE action = 'test.old'")
        cursor.execute("ALTER TABLE audit_auditentry ENABLE TRIGGER audit_entry_append_only")

    assert audit_prune.delay(7).get(timeout=30) == 1
    assert audit_prune.delay(7).get(timeout=30) == 0
    assert list(AuditEntry.objects.values_list("action", flat=True)) == ["test.new"]


@pytest.mark.django_db(transaction=True)
def test_task_is_enqueued_only_when_the_transaction_commits(celery_worker_process):
    audit_record(actor=None, trigger="policy", action="test.old")
    _age_all(days=30)

    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic():
        audit_prune.delay_on_commit(7)
        raise Rollback
    time.sleep(3)
    assert AuditEntry.objects.count() == 1

    with transaction.atomic():
        audit_prune.delay_on_commit(7)
    deadline = time.monotonic() + 30
    while AuditEntry.objects.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not AuditEntry.objects.exists()


def _age_all(*, days: int) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER audit_entry_append_only")
        cursor.execute("UPDATE audit_auditentry SET at = now() - make_interval(days => %s)", [days])
        cursor.execute("ALTER TABLE audit_auditentry ENABLE TRIGGER audit_entry_append_only")


def test_tasks_acknowledge_late():
    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.broker_url.startswith("redis://")
