"""Samples of the rows an operator of a running job emitted (the run page's data preview)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.jobs.models import Run


class SampleStatus(models.TextChoices):
    WAITING = "waiting"  # sent to the driver, which answers after an epoch
    SERVED = "served"
    FAILED = "failed"


class OperatorSample(models.Model):
    """Up to 20 rows ``operator_id`` emitted in epoch ``epoch``, as the driver answered a
    request for them; kept until the next sample of the same operator of the run."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="samples")
    operator_id = models.CharField(max_length=100)
    request_id = models.CharField(max_length=100, unique=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(max_length=16, choices=SampleStatus.choices,
                              default=SampleStatus.WAITING)
    reason = models.TextField(blank=True)
    epoch = models.BigIntegerField(null=True, blank=True)
    columns = models.JSONField(default=list)
    rows = models.JSONField(default=list)
    served_at = models.DateTimeField(null=True, blank=True)
