"""The append-only audit trail. A database trigger refuses updates, and deletes outside the
retention prune, so the trail cannot be rewritten even by code that bypasses the ORM."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.jobs.models import Trigger


class AuditEntry(models.Model):
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.DO_NOTHING, related_name="+",
        db_constraint=False,
    )
    actor_name = models.CharField(max_length=150)
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    action = models.CharField(max_length=64, db_index=True)
    job = models.ForeignKey(
        "jobs.Job", null=True, on_delete=models.DO_NOTHING, related_name="+", db_constraint=False
    )
    job_name = models.CharField(max_length=200, blank=True)
    run_id_ref = models.BigIntegerField(null=True, db_column="run_id")
    reconfiguration_id_ref = models.BigIntegerField(null=True, db_column="reconfiguration_id")
    reason = models.TextField(blank=True)
    outcome = models.CharField(max_length=32, blank=True)
    plan_diff = models.JSONField(default=dict, blank=True)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["job", "at"])]

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("audit entries are append-only")
        super().save(*args, **kwargs)
