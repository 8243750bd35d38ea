"""Live events pushed to browsers. Each type has a fixed shape, checked by the tests.

Services publish after commit, so a browser never sees a change that was rolled back.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
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
    message = {"type": "job.event", "event": event}
    layer = get_channel_layer()

    async def send_all() -> None:
        await asyncio.gather(*(layer.group_send(group, message) for group in groups))

    if _in_server_thread():
        async_to_sync(send_all)()  # on the server's own loop and its Redis connections
    else:
        asyncio.run_coroutine_threadsafe(send_all(), _sender_loop()).result(timeout=30)


def _in_server_thread() -> bool:
    """Whether this thread runs sync code for an ASGI server's event loop."""
    return getattr(SyncToAsync.threadlocal, "main_event_loop_pid", None) == os.getpid()


_sender: asyncio.AbstractEventLoop | None = None
_sender_pid = 0
_sender_lock = threading.Lock()


def _sender_loop() -> asyncio.AbstractEventLoop:
    """One event loop per process for sends from plain threads (a driver, a worker): the
    channel layer keeps its Redis connections per loop, so a loop per send would connect
    anew for every event."""
    global _sender, _sender_pid
    with _sender_lock:
        if _sender is None or _sender.is_closed() or _sender_pid != os.getpid():
            # (a forked worker inherits the loop but not the thread that runs it)
            _sender, _sender_pid = asyncio.new_event_loop(), os.getpid()
            threading.Thread(target=_sender.run_forever, name="live-events", daemon=True).start()
        return _sender


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
