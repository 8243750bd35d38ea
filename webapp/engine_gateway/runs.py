"""Run control: the control channel to a run's driver, and the driver's loop on Spark."""

from __future__ import annotations

import functools
import time
from dataclasses import replace
from typing import Any

from django.conf import settings

from engine.api import (
    Ack,
    CommandRequest,
    RedisControlChannel,
    RunFailure,
    discard_state,
    failure_of,
    kept_state,
)

__all__ = ["CONTROL_PREFIX", "Ack", "control_sample", "control_send", "control_stop",
           "driver_session", "run_driver", "state_discard", "state_kept"]

CONTROL_PREFIX = "streamscale:"


def control_send(*, run_id: int, messages: list[dict[str, str]]) -> None:
    """Append commands (wire messages, as recorded) to the run's durable control channel,
    stamped with the send time."""
    channel = _channel(run_id)
    for message in messages:
        request = CommandRequest.from_message(message)
        channel.send(replace(request, requested_at_ms=time.time() * 1000.0).to_message())


def control_stop(*, run_id: int) -> None:
    """Ask the run's driver to stop after its current epoch."""

    stop = CommandRequest(kind="stop", operator=None, request_id=f"stop-{run_id}",
                          requested_at_ms=time.time() * 1000.0)
    _channel(run_id).send(stop.to_message())


def control_sample(*, run_id: int, operator: str, request_id: str) -> None:
    """Ask the run's driver for rows ``operator`` emits from its next epoch on; the answer
    comes back as the ack of ``request_id``."""
    sample = CommandRequest(kind="sample", operator=operator, request_id=request_id,
                            requested_at_ms=time.time() * 1000.0)
    _channel(run_id).send(sample.to_message())


def _channel(run_id: int):

    url = settings.REDIS_URL
    return RedisControlChannel(url, str(run_id), CONTROL_PREFIX, client=_control_redis(url))


@functools.cache
def _control_redis(url: str):
    """One connection pool per server for control sends (no TCP set-up per command)."""
    import redis

    return redis.Redis.from_url(url, decode_responses=True)


def run_driver(
    *, document: dict[str, Any], run_id: int, checkpoint: str, master: str, host: Any,
    stop_requested: Any, running: Any = None, spark: Any = None,
) -> tuple[str, RunFailure | None]:
    """Run a job on Spark in this process until it ends; returns its status and, for a failure,
    the failure classified (``RunFailure``: transient, or the job's own error naming its
    operator). An error raised while the run starts is raised as it is (see
    ``failure_of_start``). The status is "stopped" (asked through the control channel),
    "failed", or "suspended" (when `stop_requested` was set: the query stops cleanly after its
    epoch in progress and the run resumes from its checkpoint when a driver starts again).

    `host` implements the engine's ports (metrics publisher, reconfiguration recorder);
    `running` (an Event), if given, is set once the query runs; `spark`, a session already
    up (``driver_session``), else one is started. Imports PySpark, so only the driver process
    calls it.
    """
    from engine.runtime.api import start_run, stop_run

    run = start_run(
        document, checkpoint=checkpoint, publisher=host, recorder=host, run_id=str(run_id),
        master=master, control_url=settings.REDIS_URL, control_prefix=CONTROL_PREFIX,
        state_url=_state_url(master), spark=spark,
    )
    if running is not None:
        running.set()
    while True:
        status = run.wait(timeout_s=0.5)
        if status == "failed" and run.error is not None:
            return status, failure_of(run.error, document.get("operators") or ())
        if status in ("stopped", "failed"):
            return status, None
        if stop_requested.is_set():
            stop_run(run)
            return "suspended", None


def driver_session(*, master: str) -> Any:
    """A SparkSession for a run's driver, started and warmed up ahead of the run (the warm
    standby's). Imports PySpark, so only a driver process calls it."""
    from engine.runtime.api import warm_session

    return warm_session(master=master)


def _state_url(master: str) -> str | None:
    """On a cluster the executors may sit on other machines: state goes to the networked
    store; on one machine it stays in the run's checkpoint."""
    return settings.STATE_REDIS_URL if master.startswith("spark://") else None


def state_kept(*, run_id: int, checkpoint: str, master: str) -> dict[str, int] | None:
    """``{"bytes", "entries", "key_groups"}`` of the state a run with no driver kept, as its
    store measures it; None when it kept none."""
    kept = kept_state(checkpoint, run_id=str(run_id), state_url=_state_url(master),
                      prefix=CONTROL_PREFIX)
    if kept is None:
        return None
    return {"bytes": kept.bytes, "entries": kept.entries, "key_groups": kept.key_groups}


def state_discard(*, run_id: int, checkpoint: str, master: str) -> None:
    """Delete the checkpoint and keyed state of a run with no driver."""
    discard_state(checkpoint, run_id=str(run_id), state_url=_state_url(master),
                  prefix=CONTROL_PREFIX)


def failure_of_start(error: BaseException, document: dict[str, Any]) -> RunFailure:
    """An error raised while a run started (an expression or path refused, a source Spark
    cannot analyse, a JVM that did not come up), classified like a failed query's."""
    return failure_of(error, document.get("operators") or ())
