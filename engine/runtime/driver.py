"""The per-run loop: one Spark streaming query whose micro-batches are the run's epochs.

For each epoch (``foreachBatch``) the driver fixes the epoch's plan (picked-up commands
applied, watermarks advanced) in the epoch log, acknowledges the commands, runs the
pipeline, logs the outcome and publishes the metrics. A replayed epoch (after a crash)
reuses its logged plan, and every write it repeats is skipped by epoch, so the results
are those of a run without the crash.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from engine.dag import JobGraph, state_kind_of
from engine.ports import MetricsPublisher, ReconfigurationRecorder
from engine.runtime.control import ControlChannel, MemoryControlChannel
from engine.runtime.epoch_log import EpochLog
from engine.runtime.listener import ControlListener, Rejection
from engine.runtime.logic_check import KEYED_SPECS, logic_checker
from engine.runtime.metrics import epoch_metrics
from engine.runtime.pipeline import EpochPipeline, EpochResult
from engine.runtime.reconfigure import apply_commands, malformed_ack
from engine.runtime.run_config import OperatorConfig, RunConfig, initial_config
from engine.runtime.sinks import build_sink
from engine.runtime.sources import GeneratorSpec
from engine.runtime.state import StoreSpec
from engine.runtime.streams import job_stream

STOP_MARK = "streamscale-stop-requested"


@dataclass(frozen=True)
class RunOptions:
    """How to run: checkpoint directory (Spark's and the epoch log), event time per epoch
    (the generator's rows per epoch), trigger interval (None: ``epoch_ms``; 0: epochs back
    to back), state store (None: the embedded SQLite store under the checkpoint), last epoch."""

    checkpoint: str
    run_id: str | None = None
    epoch_ms: int = 1000
    trigger_ms: int | None = None
    store: StoreSpec | None = None
    stop_after_epoch: int | None = None


class StopRequested(Exception):  # noqa: N818  # a signal, not an error
    """Raised inside an epoch that must not run because the run is stopping."""


class JobRun:
    """One run of a job graph on Spark; ``start`` returns once the query is running."""

    def __init__(
        self,
        graph: JobGraph,
        spark: SparkSession,
        options: RunOptions,
        publisher: MetricsPublisher,
        recorder: ReconfigurationRecorder | None = None,
        channel: ControlChannel | None = None,
    ) -> None:
        self.graph = graph
        self.spark = spark
        self.options = options
        self.publisher = publisher
        self.recorder = recorder
        self.channel = channel or MemoryControlChannel()
        self.log = EpochLog(os.path.join(options.checkpoint, "epochs"))
        info = _run_info(options)
        self.run_id: str = info["run_id"]
        self.start_ms: int = info["start_ms"]
        self.store = options.store or StoreSpec(
            "sqlite", os.path.join(options.checkpoint, "state"), "vsn"
        )
        self.sinks = {
            s: build_sink(graph.operator(s).type, s, dict(graph.operator(s).params), self.run_id)
            for s in graph.sinks()
        }
        self.config: RunConfig = initial_config(graph)
        self.last_epoch: int | None = None
        self.status = "starting"
        self.error: BaseException | None = None
        self._stop_after = options.stop_after_epoch
        self._last_start: float | None = None
        self._query: StreamingQuery | None = None
        self._listener: ControlListener | None = None
        self._lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Starts the control listener and the streaming query."""
        latest = self.log.latest_plan(before=2**62)
        cursor = latest[1].get("cursor") if latest else None
        self._listener = ControlListener(self.channel, cursor, self._reject_malformed)
        self._listener.start()
        stream = job_stream(self.spark, self.graph, self.start_ms, self.options.epoch_ms)
        trigger_ms = (
            self.options.epoch_ms if self.options.trigger_ms is None else (self.options.trigger_ms)
        )
        self._query = (
            stream.writeStream.foreachBatch(self._on_batch)
            .option("checkpointLocation", os.path.join(self.options.checkpoint, "spark"))
            .trigger(processingTime=f"{trigger_ms} milliseconds")
            .queryName(f"streamscale_{self.run_id}".replace("-", "_"))
            .start()
        )
        self.status = "running"

    def wait(self, timeout_s: float | None = None) -> str:
        """Blocks until the run stops (stop command, last epoch, failure) or times out;
        returns the status: running (timed out), stopped or failed (see ``error``)."""
        assert self._query is not None
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self._query.isActive:
            done = -1 if self.last_epoch is None else self.last_epoch
            if self._stop_after is not None and done >= self._stop_after:
                self._await_commit(self._stop_after)
                self.stop()
                break
            if deadline is not None and time.monotonic() > deadline:
                return self.status
            time.sleep(0.05)
        return self._finish()

    def progress(self) -> list[dict[str, Any]]:
        """Spark's progress report of each recent micro-batch (``durationMs`` and so on),
        also after the run stopped."""
        return [] if self._query is None else list(self._query.recentProgress)

    def stop(self) -> None:
        """Stops the query and the listener (the current epoch is replayed on restart
        if it had not committed)."""
        self.status = "stopping"
        if self._query is not None and self._query.isActive:
            self._query.stop()
        if self._listener is not None:
            self._listener.stop()
        self.status = "stopped"

    def _await_commit(self, epoch: int, timeout_s: float = 30.0) -> None:
        assert self._query is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self._query.isActive:
            progress = self._query.lastProgress
            if progress is not None and progress["batchId"] >= epoch:
                return
            time.sleep(0.05)

    def _finish(self) -> str:
        assert self._query is not None
        if self._listener is not None:
            self._listener.stop()
        error = self._query.exception()
        if error is not None and STOP_MARK not in str(error):
            self.error = error
            self.status = "failed"
        else:
            self.status = "stopped"
        return self.status

    # -- one epoch ---------------------------------------------------------------------

    def _on_batch(self, batch: DataFrame, epoch: int) -> None:
        if self._stop_after is not None and epoch > self._stop_after:
            raise StopRequested(STOP_MARK)
        started = time.time()
        interval_ms = (started - self._last_start) * 1000.0 if self._last_start else None
        self._last_start = started
        plan = self.log.plan(epoch) or self._new_plan(epoch, batch)
        self._deliver(plan["acks"])
        config = {op: OperatorConfig.from_dict(c) for op, c in plan["config"].items()}
        pipeline = EpochPipeline(
            self.graph, config, epoch, plan["watermarks"], self.store, self.sinks
        )
        result = pipeline.run(batch)
        self.log.write_outcome(epoch, _outcome(result, self.graph.key_groups))
        batch_ms = (time.time() - started) * 1000.0
        metrics = epoch_metrics(
            self.run_id,
            epoch,
            self.graph,
            config,
            result,
            batch_ms,
            interval_ms or batch_ms,
            self._backlog(epoch),
        )
        with self._lock:
            self.config, self.last_epoch = config, epoch
            if plan.get("stop"):
                self._stop_after = epoch
        self.publisher.publish_epoch(self.run_id, metrics)

    def _new_plan(self, epoch: int, batch: DataFrame) -> dict[str, Any]:
        previous = self.log.latest_plan(before=epoch)
        if previous is None:
            config, cursor, watermarks, outcome = initial_config(self.graph), None, {}, None
        else:
            prev_epoch, prev = previous
            config = {op: OperatorConfig.from_dict(c) for op, c in prev["config"].items()}
            cursor, watermarks = prev.get("cursor"), dict(prev["watermarks"])
            outcome = self.log.outcome(prev_epoch)
        watermarks = self._advance_watermarks(config, watermarks, outcome)
        assert self._listener is not None
        commands = self._listener.drain()
        loads = (outcome or {}).get("kg_rows", {})
        check = logic_checker(self.graph, config, batch)
        config, acks, stop = apply_commands(self.graph, config, commands, epoch, loads, check)
        plan = {
            "epoch": epoch,
            "config": {op: c.to_dict() for op, c in config.items()},
            "watermarks": watermarks,
            "cursor": commands[-1].cursor if commands else cursor,
            "acks": acks,
            "stop": stop,
        }
        self.log.write_plan(epoch, plan)
        return plan

    def _advance_watermarks(
        self, config: RunConfig, watermarks: dict[str, Any], outcome: dict[str, Any] | None
    ) -> dict[str, int | None]:
        advanced: dict[str, int | None] = {}
        seen = (outcome or {}).get("max_event_us", {})
        for op in self.graph.operators:
            keyed = KEYED_SPECS.get(op.type)
            if keyed is None:
                continue
            delay = keyed.parse(op.id, config[op.id].params).watermark_us
            current = watermarks.get(op.id)
            candidate = None if seen.get(op.id) is None else seen[op.id] - delay
            values = [v for v in (current, candidate) if v is not None]
            advanced[op.id] = max(values) if values else None
        return advanced

    def _deliver(self, acks: list[dict[str, Any]]) -> None:
        for ack in acks:
            self.channel.acknowledge(ack)
            if self.recorder is not None:
                self.recorder.acknowledge(self.run_id, ack)

    def _reject_malformed(self, rejection: Rejection) -> None:
        self._deliver([malformed_ack(*rejection)])

    def _backlog(self, epoch: int) -> int | None:
        sources = [self.graph.operator(s) for s in self.graph.sources()]
        if len(sources) != 1 or sources[0].type != "source.generator":
            return None
        spec = GeneratorSpec.from_params(sources[0].params, self.start_ms)
        due = (time.time() * 1000.0 - self.start_ms) / 1000.0 * spec.rows_per_second
        done = (epoch + 1) * spec.batch_rows(self.options.epoch_ms)
        return max(0, int(due - done))

    # -- introspection -----------------------------------------------------------------

    def failure(self) -> BaseException | None:
        """The query's error if it stopped on one (not a requested stop)."""
        error = self._query.exception() if self._query is not None else None
        return None if error is None or STOP_MARK in str(error) else error

    def parallelism(self) -> dict[str, int]:
        """Current parallelism of every operator."""
        with self._lock:
            return {op: c.parallelism for op, c in self.config.items()}

    def keyed_operators(self) -> list[str]:
        """Operators whose state lives in the VSN store."""
        return [op.id for op in self.graph.operators if state_kind_of(op) != "stateless"]


def _outcome(result: EpochResult, key_groups: int) -> dict[str, Any]:
    max_event: dict[str, int | None] = {}
    kg_rows: dict[str, list[int]] = {}
    for op_id, reports in result.stage_reports.items():
        max_event[op_id] = _max_event(reports)
        loads = [0] * key_groups
        for report in reports:
            for kg, rows in (report.get("kg_rows") or {}).items():
                loads[int(kg)] += rows
        kg_rows[op_id] = loads
    return {"max_event_us": max_event, "kg_rows": kg_rows}


def _max_event(reports: list[dict[str, Any]]) -> int | None:
    """The epoch's latest event time of a stage, which its watermark follows. A join
    takes the earlier of its two sides' latest times, so rows of the slower side are not
    made late by the faster one (Spark's default ``min`` policy for several inputs)."""
    sides = [r["max_event_sides"] for r in reports if r.get("max_event_sides")]
    if sides:
        latest = [[s[i] for s in sides if s[i] is not None] for i in (0, 1)]
        return min(max(latest[0]), max(latest[1])) if all(latest) else None
    events = [r["max_event_us"] for r in reports if r.get("max_event_us") is not None]
    return max(events) if events else None


def _run_info(options: RunOptions) -> dict[str, Any]:
    """The run's id and event-time origin, fixed at first start and kept in the
    checkpoint so a restarted run regenerates identical events."""
    path = os.path.join(options.checkpoint, "run.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    os.makedirs(options.checkpoint, exist_ok=True)
    info = {"run_id": options.run_id or uuid.uuid4().hex[:12], "start_ms": int(time.time() * 1000)}
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(info, handle)
    os.replace(tmp, path)
    return info
