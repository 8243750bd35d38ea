"""Live events pushed to browsers. Each type has a fixed shape, checked by the tests.

Services publish after commit, so a browser never sees a change that was rolled back.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

EVENT_FIELDS: dict[str, frozenset[str]] = {
    "job.version_created": frozenset({"job", "version", "author", "comment"}),
    "run.status": frozenset({"job", "run", "status", "epoch"}),
    "run.epoch": frozenset({"job", "run", "epoch", "metrics"}),
    "reconfiguration.status": frozenset({"job", "run", "reconfiguration", "status", "epoch"}),
    "run.autoscale": frozenset({"job", "run", "mode", "changes"}),
}


def job_group(job_id: int) -> str:
    """The channel-layer group of a job's subscribers."""
    return f"job.{job_id}"


def run_group(run_id: int) -> str:
    """The channel-layer group of a run's subscribers."""
    return f"run.{run_id}"


def job_event_send(*, job_id: int, event: dict[str, Any]) -> None:
    """Send an event to the job's subscribers, and to its run's if it is about a run, now."""
    _check_shape(event)
    groups = [job_group(job_id)]
    if "run" in event:
        groups.append(run_group(event["run"]))
    send = get_channel_layer().group_send
    for group in groups:
        async_to_sync(send)(group, {"type": "job.event", "event": event})


def job_event_publish(*, job_id: int, event: dict[str, Any]) -> None:
    """Send an event once the current transaction commits (at once outside a transaction)."""
    _check_shape(event)
    transaction.on_commit(lambda: job_event_send(job_id=job_id, event=event))


def _check_shape(event: dict[str, Any]) -> None:
    fields = EVENT_FIELDS.get(event.get("type", ""))
    if fields is None:
        raise ValueError(f"unknown live event type {event.get('type')!r}")
    got = set(event) - {"type"}
    if got != fields:
        raise ValueError(
            f"live event {event['type']} has fields {sorted(got)}, not {sorted(fields)}"
        )
