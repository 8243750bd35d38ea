"""Jobs, their immutable versions, runs, reconfigurations and per-epoch metrics."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.jobs.choices import (
    ACTIVE_RUN_STATUSES,
    AutoscaleMode,
    ReconfigurationKind,
    ReconfigurationStatus,
    RestartStrategy,
    RunStatus,
    Trigger,
)

__all__ = [
    "ACTIVE_RUN_STATUSES", "AutoscaleMode", "ReconfigurationKind", "ReconfigurationStatus",
    "RestartStrategy", "RunStatus", "Trigger",
]


class ImmutableRowError(Exception):
    """An immutable record was asked to change."""


class Job(models.Model):
    name = models.CharField(max_length=200, unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    latest_version = models.PositiveIntegerField(default=0)
    # An archived job is hidden from the job list by default and is neither started nor edited
    # until restored; its versions, runs and audit trail stay.
    archived_at = models.DateTimeField(null=True, blank=True)
    archived_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class JobVersion(models.Model):
    """One numbered DAG document of a job. Never changed once written."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    dag = models.JSONField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    comment = models.TextField(blank=True)

    class Meta:
        ordering = ["job", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["job", "number"], name="job_version_number_unique")
        ]

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ImmutableRowError(f"version {self.number} of job {self.job_id} is immutable")
        super().save(*args, **kwargs)

    def __str__(self) -> str:
        return f"{self.job} v{self.number}"


class Run(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="runs")
    version = models.ForeignKey(JobVersion, on_delete=models.PROTECT, related_name="runs")
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.STARTING)
    spark_master = models.CharField(max_length=200)
    driver_pid = models.IntegerField(null=True, blank=True)
    driver_host = models.CharField(max_length=200, blank=True)
    driver_launched_at = models.DateTimeField(null=True, blank=True)
    # The driver's last sign of life once its query runs (webapp.runs.driver): a run is alive
    # by its driver, not by its data, so an idle source is no failure.
    driver_heartbeat_at = models.DateTimeField(null=True, blank=True)
    checkpoint_location = models.CharField(max_length=500)
    # A stopped or failed run keeps its checkpoint and state to resume from until they are
    # discarded (webapp.runs.services.run_state_discard).
    state_discarded_at = models.DateTimeField(null=True, blank=True)
    # Instances per operator as the driver last acknowledged them (what is true now).
    parallelism = models.JSONField(default=dict)
    # Key-group owners of each keyed operator as the driver last acknowledged them:
    # [[first key group, last key group, instance], ...] per operator.
    assignment = models.JSONField(default=dict)
    # The document with every accepted reconfiguration applied (what has been asked for); the
    # next request builds on it, so concurrent requests apply one after the other.
    target_dag = models.JSONField(default=dict)
    current_epoch = models.BigIntegerField(null=True, blank=True)
    restarts = models.PositiveIntegerField(default=0)
    # How a crashed driver is restarted (webapp.runs.restarts); a job's own error never is.
    restart_strategy = models.CharField(
        max_length=16, choices=RestartStrategy.choices, default=RestartStrategy.EXPONENTIAL
    )
    restart_attempts = models.PositiveIntegerField(null=True, blank=True)  # fixed only
    restart_delay_s = models.FloatField(null=True, blank=True)  # fixed only
    failure_reason = models.TextField(blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    autoscale_mode = models.CharField(
        max_length=16, choices=AutoscaleMode.choices, default=AutoscaleMode.OFF
    )
    autoscale_min = models.PositiveIntegerField(default=1)
    autoscale_max = models.PositiveIntegerField(null=True, blank=True)
    autoscale_cooldown_s = models.PositiveIntegerField(default=60)
    autoscale_last_action_at = models.DateTimeField(null=True, blank=True)
    autoscale_proposal = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["job", "status"])]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.job}"


class Reconfiguration(models.Model):
    """A change to a running job's execution plan, from request to effect."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="reconfigurations")
    request_id = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=ReconfigurationKind.choices)
    operators = models.JSONField(default=list)
    request = models.JSONField(default=dict)
    plan_before = models.JSONField(default=dict)
    plan_after = models.JSONField(default=dict)
    plan_diff = models.JSONField(default=dict)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.TextField()
    trigger = models.CharField(max_length=16, choices=Trigger.choices, default=Trigger.USER)
    status = models.CharField(
        max_length=16,
        choices=ReconfigurationStatus.choices,
        default=ReconfigurationStatus.REQUESTED,
    )
    status_reason = models.TextField(blank=True)
    requested_at = models.DateTimeField(auto_now_add=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    applied_epoch = models.BigIntegerField(null=True, blank=True)
    control_latency_ms = models.FloatField(null=True, blank=True)
    state_bytes_moved = models.BigIntegerField(null=True, blank=True)
    before = models.JSONField(default=dict)
    after = models.JSONField(default=dict)
    # What the preview predicted when the change was requested, {"now", "after"} (see
    # webapp.reconfigurations.figures); {} when it predicted nothing.
    predicted = models.JSONField(default=dict)
    # The control-channel commands this change was delivered as, and their acknowledgements.
    commands = models.JSONField(default=list)
    acks = models.JSONField(default=list)

    class Meta:
        ordering = ["-requested_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "request_id"], name="reconfiguration_request_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} on run {self.run_id}"


class RunEpoch(models.Model):
    """Run-wide figures of one epoch (micro-batch)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="epochs")
    epoch = models.BigIntegerField()
    recorded_at = models.DateTimeField()
    batch_duration_ms = models.FloatField()
    backlog_rows = models.BigIntegerField(default=0)
    rows_in = models.BigIntegerField(default=0)
    rows_out = models.BigIntegerField(default=0)
    latency_p50_ms = models.FloatField(null=True)
    latency_p99_ms = models.FloatField(null=True)
    latency_max_ms = models.FloatField(null=True)
    # Broker sources: {source: {"lag": {stream: entries}, "backlog", "dead_letters",
    # "dead_letter_sample"}} of this epoch.
    broker = models.JSONField(default=dict, blank=True)
    # What the autoscaler judges load from: the sources' offered load and backlog, the
    # measured regions and each operator's rows, busy time and demanded rate.
    load = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "epoch"], name="run_epoch_once")]
        indexes = [models.Index(fields=["run", "recorded_at"])]


class OperatorEpoch(models.Model):
    """One operator's figures in one epoch; rates are rows per second."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="operator_epochs")
    epoch = models.BigIntegerField()
    operator_id = models.CharField(max_length=100)
    recorded_at = models.DateTimeField()
    instances = models.PositiveIntegerField()
    rows_in = models.BigIntegerField(default=0)
    rows_out = models.BigIntegerField(default=0)
    busy_ms = models.JSONField(default=list)
    input_rate = models.FloatField(null=True)
    processing_rate = models.FloatField(null=True)
    output_rate = models.FloatField(null=True)
    congested = models.BooleanField(default=False)
    etp = models.FloatField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "epoch", "operator_id"], name="operator_epoch_once"
            )
        ]
        indexes = [models.Index(fields=["run", "operator_id", "recorded_at"])]


class RunMinute(models.Model):
    """Run-wide figures of one minute, rolled up from its epochs once they leave the
    full-resolution window (see webapp.jobs.retention)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="minutes")
    minute = models.DateTimeField()
    epochs = models.PositiveIntegerField()
    rows_in = models.BigIntegerField(default=0)
    rows_out = models.BigIntegerField(default=0)
    batch_duration_ms = models.FloatField()  # mean over the minute's epochs
    backlog_rows = models.BigIntegerField(default=0)  # the largest
    latency_p99_ms = models.FloatField(null=True)  # the largest
    latency_max_ms = models.FloatField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "minute"], name="run_minute_once")]


class OperatorMinute(models.Model):
    """One operator's figures over one minute; rates are means of its epochs' rates."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="operator_minutes")
    operator_id = models.CharField(max_length=100)
    minute = models.DateTimeField()
    epochs = models.PositiveIntegerField()
    instances = models.PositiveIntegerField()  # the most in the minute
    rows_in = models.BigIntegerField(default=0)
    rows_out = models.BigIntegerField(default=0)
    input_rate = models.FloatField(null=True)
    processing_rate = models.FloatField(null=True)
    output_rate = models.FloatField(null=True)
    congested_epochs = models.PositiveIntegerField(default=0)
    etp = models.FloatField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "operator_id", "minute"], name="operator_minute_once"
            )
        ]


class SinkTarget(models.Model):
    """A Postgres table (by its plain name) or a data folder a job's sinks write to, owned by
    the job that first named it: another job naming it (or its staging table, or a folder
    inside or around it) is refused until an admin hands it over."""

    kind = models.CharField(max_length=10)  # "table" or "folder" (engine.dag.sinks)
    name = models.CharField(max_length=1000)
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="sink_targets")
    claimed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["kind", "name"]
        constraints = [models.UniqueConstraint(fields=["kind", "name"], name="sink_target_once")]

    def __str__(self) -> str:
        return f"{self.kind} {self.name!r}"
