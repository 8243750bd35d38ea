"""The vocabularies of runs and changes: a run's status and autoscaler mode, a
reconfiguration's kind and status, and what triggered a change; kept apart from the models
they label (``webapp.jobs.models`` re-exports them)."""

from __future__ import annotations

from django.db import models


class RunStatus(models.TextChoices):
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"
    RECOVERING = "recovering"


class RestartStrategy(models.TextChoices):
    EXPONENTIAL = "exponential"  # at once, then 1 s doubling to 60 s between restarts
    FIXED = "fixed"  # a number of attempts, a fixed delay apart
    NONE = "none"  # the first crash fails the run


class AutoscaleMode(models.TextChoices):
    OFF = "off"
    RECOMMEND = "recommend"
    AUTO = "auto"


ACTIVE_RUN_STATUSES = (
    RunStatus.STARTING,
    RunStatus.RUNNING,
    RunStatus.STOPPING,
    RunStatus.RECOVERING,
)


class ReconfigurationKind(models.TextChoices):
    RESCALE = "rescale"
    SCALE_OUT = "scale_out"
    SCALE_IN = "scale_in"
    REBALANCE = "rebalance"
    LOGIC = "logic"
    RESOURCES = "resources"
    ROLLBACK = "rollback"


class ReconfigurationStatus(models.TextChoices):
    REQUESTED = "requested"
    PENDING = "pending"
    APPLIED = "applied"
    REJECTED = "rejected"
    FAILED = "failed"


class Trigger(models.TextChoices):
    USER = "user"
    API_TOKEN = "api_token"
    POLICY = "policy"  # the autoscaler's decisions
    SYSTEM = "system"  # what the product records on its own: how runs and changes ended
