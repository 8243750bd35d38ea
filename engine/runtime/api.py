"""The engine's runtime API, as the control plane calls it.

>>> run = start_run(job_document, checkpoint="var/runs/42", publisher=p, recorder=r,
...                 control_url=settings_redis_url, run_id="42")
>>> request_reconfiguration(run.channel, kind="rescale", operator="counts", parallelism=6)
>>> run.wait()            # or stop_run(run)
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pyspark.sql import SparkSession

from engine.dag import JobGraph, parse_job_graph
from engine.ports import MetricsPublisher, ReconfigurationRecorder
from engine.runtime.control.channel import ControlChannel, open_control_channel
from engine.runtime.control.messages import CommandKind, CommandRequest
from engine.runtime.driver.job_run import JobRun, RunOptions
from engine.runtime.driver.kept_state import run_store
from engine.runtime.driver.metrics import CollectingPublisher
from engine.runtime.driver.options import run_info
from engine.runtime.spark.class_archive import make_archive
from engine.runtime.spark.session import build_session
from engine.runtime.state.redis_durability import require_durable

DEFAULT_CONTROL_PREFIX = "streamscale:"


def load_graph(document: Mapping[str, Any] | JobGraph) -> JobGraph:
    """A validated JobGraph (raises engine.errors.DagValidationError with every problem)."""
    if isinstance(document, JobGraph):
        return document
    return parse_job_graph(dict(document))


def start_run(
    document: Mapping[str, Any] | JobGraph,
    *,
    checkpoint: str,
    publisher: MetricsPublisher,
    recorder: ReconfigurationRecorder | None = None,
    run_id: str | None = None,
    spark: SparkSession | None = None,
    master: str = "local[2]",
    epoch_ms: int = 1000,
    trigger_ms: int | None = None,
    state_url: str | None = None,
    control_url: str | None = None,
    control_prefix: str = DEFAULT_CONTROL_PREFIX,
    stop_after_epoch: int | None = None,
) -> JobRun:
    """Starts a run of a job graph and returns it running.

    ``checkpoint`` holds Spark's checkpoint, the epoch log and (without ``state_url``)
    the embedded state store. ``epoch_ms`` is the event time one epoch covers (a
    generator emits ``rows_per_second * epoch_ms / 1000`` rows per epoch); ``trigger_ms``
    the processing-time trigger (default ``epoch_ms``; 0 runs epochs back to back).
    Starting again on the same checkpoint resumes the run exactly once. ``state_url``
    ``redis://...`` selects the networked store; ``control_url`` ``redis://...`` the
    durable control channel (else in memory).
    """
    if state_url:
        require_durable(state_url)  # before Spark starts: a clear refusal, not a late one
    # The session first: validation then parses expressions on its JVM, not on a second one.
    session = spark or build_session(master=master, app_name=f"streamscale-{_name_of(document)}")
    graph = load_graph(document)
    run_key = run_id or uuid.uuid4().hex[:12]
    store = run_store(checkpoint, run_key, state_url, control_prefix) if state_url else None
    options = RunOptions(
        checkpoint=checkpoint,
        run_id=run_key,
        epoch_ms=epoch_ms,
        trigger_ms=trigger_ms,
        store=store,
        stop_after_epoch=stop_after_epoch,
    )
    # A restarted run keeps the id stored in its checkpoint.
    channel = open_control_channel(control_url, str(run_info(options)["run_id"]), control_prefix)
    run = JobRun(graph, session, options, publisher, recorder, channel)
    run.start()
    return run


def warm_session(*, master: str) -> SparkSession:
    """A session for a run to come, started and warmed up: a small keyed job's epochs, run
    through the engine on it, load what a run's first epoch would otherwise load (the
    scheduler, the JVM's classes and generated code for Arrow and the stages, the Python
    worker daemon)."""
    session = build_session(master=master, app_name="streamscale-standby")
    with tempfile.TemporaryDirectory(prefix="streamscale-warm-up-") as checkpoint:
        run = start_run(_WARM_UP_JOB, checkpoint=checkpoint, publisher=CollectingPublisher(),
                        spark=session, trigger_ms=0, stop_after_epoch=WARM_UP_EPOCHS - 1)
        run.wait()
    return session


def make_class_archive() -> Path | None:
    """The JVM class archive drivers start from, made unless it is, in a process that runs
    no other session (its JVM exits)."""
    return make_archive(_warm_up_and_exit)


def _warm_up_and_exit(java_options: str) -> None:
    build_session(app_name="streamscale-class-archive", java_options=java_options)
    session = warm_session(master="local[2]")  # the session just built, warmed up
    jvm = session.sparkContext._gateway.proc  # type: ignore[union-attr]
    session.stop()
    # The JVM exits when its stdin closes; it writes the archive as it does.
    jvm.stdin.close()
    jvm.wait()


WARM_UP_EPOCHS = 3
_WARM_UP_JOB = {
    "name": "warm-up", "key_groups": 8,
    "operators": [
        {"id": "events", "type": "source.generator",
         "params": {"rows_per_second": 2000, "keys": 100, "seed": 1}},
        {"id": "views", "type": "filter", "params": {"condition": "event_type = 'view'"}},
        {"id": "counts", "type": "window_aggregate", "parallelism": 2, "params": {
            "key": ["campaign_id"], "time": "event_time", "window": "1 seconds",
            "watermark": "1 milliseconds", "aggregates": {"views": "count(*)"}}},
        {"id": "out", "type": "sink.memory", "params": {}}],
    "edges": [{"from": "events", "to": "views"}, {"from": "views", "to": "counts"},
              {"from": "counts", "to": "out"}],
}


def _name_of(document: Mapping[str, Any] | JobGraph) -> str:
    name = document.name if isinstance(document, JobGraph) else document.get("name")
    return str(name)[:100] if name else "job"


def stop_run(run: JobRun) -> str:
    """Stops a run; the current epoch is replayed on the next start if unfinished."""
    run.stop()
    return run.status


def request_reconfiguration(
    channel: ControlChannel,
    *,
    kind: CommandKind,
    operator: str | None = None,
    parallelism: int | None = None,
    assignment: Sequence[int] | Literal["weighted"] | None = None,
    params: Mapping[str, Any] | None = None,
    request_id: str | None = None,
) -> str:
    """Sends a command on a run's control channel; returns its request id. Its ack goes
    to the run's recorder."""
    request = CommandRequest(
        kind=kind, operator=operator, request_id=request_id or uuid.uuid4().hex,
        requested_at_ms=time.time() * 1000.0, parallelism=parallelism,
        assignment=tuple(assignment) if not isinstance(assignment, str | None) else assignment,
        params=params,
    )
    channel.send(request.to_message())
    return request.request_id
