"""The per-run loop: one Spark streaming query whose micro-batches are the run's epochs.

For each epoch (``foreachBatch``) the driver fixes the epoch's plan (picked-up commands
applied, watermarks advanced) in the epoch log, acknowledges the commands, runs the
pipeline, logs the outcome and publishes the metrics. A replayed epoch (after a crash)
reuses its logged plan, and every write it repeats is skipped by epoch, so the results
are those of a run without the crash.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from engine.dag import JobGraph, state_kind_of
from engine.planner import PhysicalPlan, plan_job
from engine.ports import MetricsPublisher, ReconfigurationRecorder
from engine.runtime.control.channel import ControlChannel, MemoryControlChannel
from engine.runtime.control.listener import ControlListener, Rejection
from engine.runtime.control.outbox import RunDeliveries
from engine.runtime.control.reconfigure import apply_commands, malformed_ack
from engine.runtime.control.run_config import (
    OperatorConfig,
    RunConfig,
    initial_config,
    running_plan,
)
from engine.runtime.driver.epoch_log import EpochLog
from engine.runtime.driver.metrics import epoch_metrics, stage_max_event_us
from engine.runtime.io.broker.lag import broker_lags, broker_report
from engine.runtime.io.epoch_clock import POLL_MS, Waker
from engine.runtime.io.sinks import build_sink
from engine.runtime.io.source_load import (
    ClockSource,
    SourceLoad,
    build_meters,
    source_figures,
)
from engine.runtime.io.streams import clock_source_rows, job_stream, paced_by_clock
from engine.runtime.spark.session import streaming_error_logs
from engine.runtime.stage.logic_check import KEYED_SPECS, logic_checker
from engine.runtime.stage.pipeline import EpochPipeline, EpochResult
from engine.runtime.stage.regions import StageClock
from engine.runtime.state import StoreSpec, open_store

STOP_MARK = "streamscale-stop-requested"
WORKER_START_TIMEOUT = "Python worker failed to connect back"
WORKER_START_RETRIES = 3


@dataclass(frozen=True)
class RunOptions:
    """How to run: checkpoint directory (Spark's and the epoch log), the epoch's nominal
    length, trigger interval (None: ``epoch_ms``; 0: epochs back to back), state store
    (None: the embedded SQLite store under the checkpoint), last epoch.

    With a trigger, clock sources offer the rows due by the wall clock and an epoch takes
    them up to the source's cap. Back to back, the load is saturating: every epoch takes
    ``epoch_ms`` worth of each clock source's rate, whatever the clock says."""

    checkpoint: str
    run_id: str | None = None
    epoch_ms: int = 1000
    trigger_ms: int | None = None
    store: StoreSpec | None = None
    stop_after_epoch: int | None = None


class StopRequested(Exception):  # noqa: N818  # a signal, not an error
    """Raised inside an epoch that must not run because the run is stopping."""


def _not_a_stop(record: logging.LogRecord) -> bool:
    # py4j logs every exception raised in a Python callback; an epoch refused by a stop is none.
    return not (record.exc_info and isinstance(record.exc_info[1], StopRequested))


logging.getLogger("py4j.clientserver").addFilter(_not_a_stop)


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
        self.config: RunConfig = initial_config(plan_job(graph))
        self._plans: dict[str, PhysicalPlan] = {}
        self.meters = build_meters(
            graph, self.start_ms, options.epoch_ms, back_to_back=options.trigger_ms == 0
        )
        self._clocks = {op: m for op, m in self.meters.items() if isinstance(m, ClockSource)}
        self._loads: dict[str, SourceLoad] = {}
        self._loads_at: dict[str, float] = {}
        self._clock = StageClock(spark, f"streamscale-{self.run_id}")
        self.last_epoch: int | None = None
        self.status = "starting"
        self.error: BaseException | None = None
        self._stop_after = options.stop_after_epoch
        self._last_start: float | None = None
        self._query: StreamingQuery | None = None
        self._listener: ControlListener | None = None
        self._lock = threading.Lock()
        self._worker_retries = 0
        # A stop never interrupts an epoch in progress: an epoch that starts once the stop is
        # asked for is refused (not committed, replayed at the next start) and remembered, so
        # that the query's end tells a stop from a failure by state, not by message text.
        self._stopping = False
        self._in_epoch = False
        self._refused_epoch: int | None = None
        # A command picked up between epochs starts the next one at once (epoch_clock).
        self._waker = Waker(os.path.join(options.checkpoint, "epoch-clock-wake"))
        # Acks and metrics leave through queues, off the epoch's path (retried there).
        self.deliveries = RunDeliveries(self.run_id, self.channel, publisher, recorder)

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Starts the control listener and the streaming query."""
        latest = self.log.latest_plan(before=2**62)
        cursor = latest[1].get("cursor") if latest else None
        self._listener = ControlListener(self.channel, cursor, self._reject_malformed,
                                         on_command=self._waker.wake)
        self._listener.start()
        self._start_query()
        self.status = "running"

    def _start_query(self) -> None:
        interval_ms = (
            self.options.epoch_ms if self.options.trigger_ms is None else (self.options.trigger_ms)
        )
        # A run whose sources are all clock sources is paced by the epoch clock, which a
        # command wakes; any other by Spark's trigger.
        paced = paced_by_clock(self.graph) and interval_ms > 0
        stream = job_stream(self.spark, self.graph, interval_ms=interval_ms if paced else 0,
                            wake=self._waker.path)
        trigger_ms = POLL_MS if paced else interval_ms
        self._query = (
            stream.writeStream.foreachBatch(self._on_batch)
            .option("checkpointLocation", os.path.join(self.options.checkpoint, "spark"))
            .trigger(processingTime=f"{trigger_ms} milliseconds")
            .queryName(f"streamscale_{self.run_id}".replace("-", "_"))
            .start()
        )

    def _restarted(self) -> bool:
        """Restarts the query from its checkpoint (exactly once, like any restart) if it
        failed only because a Python worker (a Python data source's planner) did not
        connect back within Spark's fixed 10 s: a machine too busy to start Python in
        time. At most ``WORKER_START_RETRIES`` times per run."""
        error = self._query.exception() if self._query is not None else None
        if error is None or WORKER_START_TIMEOUT not in str(error):
            return False
        if self._worker_retries >= WORKER_START_RETRIES or self.status != "running":
            return False
        self._worker_retries += 1
        self._start_query()
        return True

    def wait(self, timeout_s: float | None = None) -> str:
        """Blocks until the run stops (stop command, last epoch, failure) or times out;
        returns the status: running (timed out), stopped or failed (see ``error``)."""
        assert self._query is not None
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self._query.isActive or self._restarted():
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

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stops the query after the epoch in progress, if any, and the listener; an epoch
        not yet committed is replayed on restart.

        Interrupting an epoch mid-way makes Spark match the Python callback's long error
        text against a regex that overflows the JVM's stack; stopping between epochs keeps
        the end clean and the query's exception meaningful.
        """
        self.status = "stopping"
        with self._lock:
            self._stopping = True
        deadline = time.monotonic() + timeout_s
        while self._query is not None and self._query.isActive:
            if not self._in_epoch or time.monotonic() > deadline:
                self._query.stop()
                break
            time.sleep(0.02)
        if self._listener is not None:
            self._listener.stop()
        self.deliveries.close()
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
        self.deliveries.close()
        error = self.failure()
        if self._refused_epoch is not None:
            streaming_error_logs(self.spark, enabled=True)
        if error is not None:
            self.error = error
            self.status = "failed"
        else:
            self.status = "stopped"
        return self.status

    # -- one epoch ---------------------------------------------------------------------

    def _on_batch(self, batch: DataFrame, epoch: int) -> None:
        with self._lock:
            refuse = self._stopping or (self._stop_after is not None and epoch > self._stop_after)
            if refuse:
                self._refused_epoch = epoch
            self._in_epoch = not refuse
        if refuse:
            # Spark logs the refusal as a query error with a trace: not one for the user.
            streaming_error_logs(self.spark, enabled=False)
            raise StopRequested(STOP_MARK)
        try:
            self._run_epoch(batch, epoch)
        finally:
            self._in_epoch = False

    def _run_epoch(self, batch: DataFrame, epoch: int) -> None:
        started = time.time()
        interval_ms = (started - self._last_start) * 1000.0 if self._last_start else None
        self._last_start = started
        plan = self.log.plan(epoch) or self._new_plan(epoch, batch)
        config = {op: OperatorConfig.from_dict(c) for op, c in plan["config"].items()}
        ranges = plan.get("sources", {})
        frames = clock_source_rows(
            self.spark, self.graph, self.start_ms, ranges,
            {op: config[op].parallelism for op in ranges},
        )
        self._clock.epoch = epoch
        pipeline = EpochPipeline(
            self.graph, config, epoch, plan["watermarks"], self.store, self.sinks,
            source_frames=frames, clock=self._clock, plan=self._running_plan(plan["config"]),
        )
        result = pipeline.run(batch)
        self.log.write_outcome(epoch, _outcome(result, self.graph.key_groups))
        batch_ms = (time.time() - started) * 1000.0
        lags = broker_lags(self.graph, self.options.checkpoint, epoch)
        metrics = epoch_metrics(
            self.run_id,
            epoch,
            self.graph,
            config,
            result,
            batch_ms,
            interval_ms or batch_ms,
            {**self._source_figures(epoch, ranges, batch, interval_ms or batch_ms),
             **self._broker_figures(lags, result, interval_ms or batch_ms)},
            self._clock,
            watermarks=plan["watermarks"],
        )
        metrics.update(broker_report(lags, result.dead_letters))
        # The epoch is committed: its acks can say when the change took effect.
        self.deliveries.acks(plan["acks"], ended_at_ms=time.time() * 1000.0)
        self.deliveries.metrics(epoch, metrics)
        with self._lock:
            self.config, self.last_epoch = config, epoch
            if plan.get("stop"):
                self._stop_after = epoch

    def _running_plan(self, config: dict[str, Any]) -> PhysicalPlan:
        """The planner's plan of the configuration an epoch runs (made once per config)."""
        key = json.dumps(config, sort_keys=True)
        if key not in self._plans:
            parsed = {op: OperatorConfig.from_dict(c) for op, c in config.items()}
            self._plans = {key: running_plan(self.graph, parsed)}
        return self._plans[key]

    def _new_plan(self, epoch: int, batch: DataFrame) -> dict[str, Any]:
        previous = self.log.latest_plan(before=epoch)
        if previous is None:
            config, cursor, watermarks = initial_config(plan_job(self.graph)), None, {}
            outcome = None
            self._anchor_clock()
            taken: dict[str, list[int]] = {}
        else:
            prev_epoch, prev = previous
            config = {op: OperatorConfig.from_dict(c) for op, c in prev["config"].items()}
            cursor, watermarks = prev.get("cursor"), dict(prev["watermarks"])
            outcome = self.log.outcome(prev_epoch)
            taken = prev.get("sources", {})
        watermarks = self._advance_watermarks(config, watermarks, outcome)
        assert self._listener is not None
        commands = self._listener.drain()
        loads = (outcome or {}).get("kg_rows", {})
        empty = {op: [0, 0] for op in self._clocks}
        shapes = clock_source_rows(
            self.spark, self.graph, self.start_ms, empty if commands else {},
            dict.fromkeys(empty, 1),
        )
        check = logic_checker(self.graph, config, batch, shapes)
        config, acks, stop = apply_commands(
            self.graph, config, commands, epoch, loads, check, open_store(self.store).hand_over
        )
        plan = {
            "epoch": epoch,
            "config": {op: c.to_dict() for op, c in config.items()},
            "watermarks": watermarks,
            "cursor": commands[-1].cursor if commands else cursor,
            "acks": acks,
            "stop": stop,
            "sources": self._take(taken),
        }
        self.log.write_plan(epoch, plan)
        return plan

    def _anchor_clock(self) -> None:
        """Before the first epoch: the clock sources' rows fall due from one epoch ago, not
        from when the run was created (Spark's start-up is not load the run fell behind on)."""
        self.start_ms = int(time.time() * 1000) - self.options.epoch_ms
        _save_run_info(self.options, {"run_id": self.run_id, "start_ms": self.start_ms})
        for clock in self._clocks.values():
            clock.start_ms = self.start_ms

    def _take(self, taken: dict[str, list[int]]) -> dict[str, list[int]]:
        """Each clock source's row range for the epoch being planned: from where the last
        one ended, what is due now, up to the source's cap."""
        now_ms = time.time() * 1000.0
        ranges = {}
        for op, clock in self._clocks.items():
            first = taken[op][1] if op in taken else 0
            ranges[op] = list(clock.take(first, now_ms))
        return ranges

    def _broker_figures(
        self, lags: dict[str, dict[str, int]], result: EpochResult, interval_ms: float
    ) -> dict[str, dict[str, Any]]:
        """A broker source's load: what it consumed so far, and its lag as the backlog."""
        figures = {}
        for op, streams in lags.items():
            taken = result.rows_out.get(op) or 0
            before = self._loads.get(op) or SourceLoad(0, 0)
            consumed = before.consumed + taken
            load = SourceLoad(consumed + sum(streams.values()), consumed)
            if op not in self._loads:  # the first reading: the lag before this epoch is unknown
                before = SourceLoad(load.offered - taken, load.consumed - taken)
            now_ms = time.time() * 1000.0
            since_ms = now_ms - self._loads_at[op] if op in self._loads_at else interval_ms
            figures[op] = source_figures(before, load, since_ms)
            self._loads[op], self._loads_at[op] = load, now_ms
        return figures

    def _source_figures(
        self, epoch: int, ranges: dict[str, list[int]], batch: DataFrame, interval_ms: float
    ) -> dict[str, dict[str, Any]]:
        """Offered, consumed and backlog of every source at the end of this epoch."""
        now_ms = time.time() * 1000.0
        figures = {}
        for op, meter in self.meters.items():
            taken = ranges[op][1] - ranges[op][0] if op in ranges else _files_read(batch, op)
            meter.took(ranges[op][1] if op in ranges else None, taken)
            load = meter.offered(epoch, now_ms)
            before = self._loads.get(op) or SourceLoad(
                load.offered - taken, load.consumed - taken, load.unit
            )
            # Rates over the time between the two readings, not between epoch starts.
            since_ms = now_ms - self._loads_at[op] if op in self._loads_at else interval_ms
            figures[op] = source_figures(before, load, since_ms)
            self._loads[op], self._loads_at[op] = load, now_ms
        return figures

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

    def _reject_malformed(self, rejection: Rejection) -> None:
        self.deliveries.acks([malformed_ack(*rejection)], ended_at_ms=None)

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Waits until the acks and metrics of the epochs done so far are delivered."""
        return self.deliveries.flush(timeout_s)

    # -- introspection -----------------------------------------------------------------

    def failure(self) -> BaseException | None:
        """The query's error if it ended on one: not a stop, which ends the query without
        an error (``stop``) or by an epoch this run refused, and not a worker-start time-out
        the run recovered from by restarting the query."""
        if self._restarted():
            return None
        if self._query is None or self._query.isActive:
            return None
        error = self._query.exception()
        return None if error is None or self._refused_epoch is not None else error

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
        max_event[op_id] = stage_max_event_us(reports)
        loads = [0] * key_groups
        for report in reports:
            for kg, rows in (report.get("kg_rows") or {}).items():
                loads[int(kg)] += rows
        kg_rows[op_id] = loads
    return {"max_event_us": max_event, "kg_rows": kg_rows}


def _run_info(options: RunOptions) -> dict[str, Any]:
    """The run's id and event-time origin, fixed at first start and kept in the
    checkpoint so a restarted run regenerates identical events."""
    path = os.path.join(options.checkpoint, "run.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    info = {"run_id": options.run_id or uuid.uuid4().hex[:12], "start_ms": int(time.time() * 1000)}
    _save_run_info(options, info)
    return info


def _save_run_info(options: RunOptions, info: dict[str, Any]) -> None:
    os.makedirs(options.checkpoint, exist_ok=True)
    path = os.path.join(options.checkpoint, "run.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(info, handle)
    os.replace(tmp, path)


def _files_read(batch: DataFrame, op_id: str) -> int:
    """Files a directory source read in this epoch (Spark's file source lists them)."""
    try:
        return len(set(batch.inputFiles()))
    except Exception:  # noqa: BLE001 - a batch without file scans read no file
        return 0
