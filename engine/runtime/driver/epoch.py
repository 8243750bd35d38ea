"""One epoch's work, once its plan is fixed: the pipeline over the batch, the outcome in
the epoch log, then the metrics and the acks, which leave off the epoch's path.

A rescale or rebalance that arrives while a keyed operator's stage runs does not wait for
the next epoch: the running attempt is interrupted and the epoch runs again under its plan
with the change applied. Key groups the void attempt committed are replayed from their
marks, sinks skip an epoch they committed, so the epoch's results are those of one attempt
under the new plan.

How the attempt is interrupted follows which way the epoch ends first. A stage whose
routing runs is cancelled, and the epoch runs again whole at the new parallelism; or the
attempt runs the stage to its end, and the rerun replays its key groups. The runner weighs
the two with the run's own figures (``RerunCosts``), kept apart for epochs in which the
operator may emit rows (a window aggregate's that close windows, every dedupe's and
join's) and the others: the rest of the attempt plus a replay, against a whole epoch at
the new parallelism. A window aggregate's replay runs no Spark job: in an epoch that closes
no window the driver checks the store (``vsn_stage._replayed_without_job``), in one that
does the rerun emits the void attempt's output again (``vsn_stage.reemitted``). A dedupe's
or a join's is a Spark job whose instances read the stored rows back and emit them."""

from __future__ import annotations

import functools
import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame

from engine.dag import JobGraph, state_kind_of
from engine.runtime.control.commands import WORKLOAD_KINDS, Command
from engine.runtime.control.outbox import RunDeliveries
from engine.runtime.control.run_config import OperatorConfig, RunConfig
from engine.runtime.driver.metrics import epoch_metrics, stage_max_event_us
from engine.runtime.driver.planning import EpochPlanner
from engine.runtime.driver.source_readings import SourceReadings
from engine.runtime.io.broker.lag import broker_lags, broker_report
from engine.runtime.io.sinks import Sink, build_sink
from engine.runtime.io.streams import clock_source_rows
from engine.runtime.stage.pipeline import EarlierAttempts, EpochPipeline, EpochResult
from engine.runtime.stage.regions import AttemptTimes, EpochInterrupted, StageClock
from engine.runtime.stage.routing_code import compile_ahead

# Attempts of one epoch at most: the last one is not interrupted, so a stream of commands
# cannot keep an epoch from ending.
MAX_ATTEMPTS = 3


# Recent epochs weighed by ``RerunCosts``: enough for a median, few enough to follow a change.
RECENT = 5


@dataclass
class RerunCosts:
    """What an interrupted epoch's two ways to end cost, from the run's recent epochs, for
    each keyed operator and kind of epoch (``emits``: whether the operator may emit rows
    in it, which makes its replay a Spark job): a whole epoch at each parallelism (epochs
    that ran once), and a replay (from the interrupt of the attempt it voided to the
    epoch's end)."""

    epochs_ms: dict[tuple[str, int, bool], deque[float]] = field(default_factory=dict)
    replays_ms: dict[tuple[str, bool], deque[float]] = field(default_factory=dict)
    reemits: frozenset[str] = frozenset()
    """The operators whose replay emits the void attempt's output again (window
    aggregates'): no Spark job, even in an epoch in which they emit."""

    def epoch_ran(self, op_id: str, parallelism: int, emits: bool, ms: float) -> None:
        """A whole epoch of ``op_id`` that ran once at ``parallelism``."""
        self.epochs_ms.setdefault((op_id, parallelism, emits), deque(maxlen=RECENT)).append(ms)

    def replayed(self, op_id: str, emits: bool, ms: float) -> None:
        """An epoch's replay of ``op_id``'s stage, from the end of the attempt it voided
        (let to end by the interrupt, or past cancelling when it came)."""
        self.replays_ms.setdefault((op_id, emits), deque(maxlen=RECENT)).append(ms)

    def cancel(self, op_id: str, old: int, new: int, elapsed_ms: float, emits: bool) -> bool:
        """Whether cancelling the attempt (``elapsed_ms`` in, ``op_id`` at ``old``
        instances) ends the epoch before letting its stage end and replaying it does: a
        whole epoch at ``new`` (at ``old`` if none ran yet) after the cancel, against the
        rest of an epoch at ``old`` and a replay. With no epoch at ``old`` to go by, it
        cancels; with no replay measured yet, it takes one that needs no Spark job as free
        and cancels one that does (a Spark job whose instances emit the stored rows again
        costs a good part of a whole epoch)."""
        at_old = self._typical(self.epochs_ms.get((op_id, old, emits)))
        replay = self._typical(self.replays_ms.get((op_id, emits)))
        if at_old is None or (replay is None and emits and op_id not in self.reemits):
            return True
        at_new = self._typical(self.epochs_ms.get((op_id, new, emits))) or at_old
        return elapsed_ms + at_new < at_old + (replay or 0.0)

    @staticmethod
    def _typical(found: deque[float] | None) -> float | None:
        return statistics.median(found) if found else None


@dataclass(frozen=True)
class EpochDone:
    """What the run keeps of an epoch it ran: its configuration and whether it is the last."""

    config: RunConfig
    stop: bool


class EpochRunner:
    """Runs an epoch's plan and reports it."""

    def __init__(self, planner: EpochPlanner, deliveries: RunDeliveries) -> None:
        self.planner, self.deliveries = planner, deliveries
        self.graph: JobGraph = planner.graph
        self.sinks: dict[str, Sink] = {
            s: build_sink(self.graph.operator(s).type, s, dict(self.graph.operator(s).params),
                          planner.run_id)
            for s in self.graph.sinks()
        }
        self.clock = StageClock(planner.spark, f"streamscale-{planner.run_id}")
        self.readings = SourceReadings(planner.meters)
        self._keyed = {op.id for op in self.graph.operators if state_kind_of(op) == "keyed"}
        self._attempt_start = 0.0
        # The running attempt's configuration and plan's ``closes``, for ``interrupt``.
        self._config: RunConfig = {}
        self._closes: dict[str, bool] = {}
        self.costs = RerunCosts(reemits=frozenset(
            op.id for op in self.graph.operators if op.type == "window_aggregate"))
        # The operator (and whether it may emit) whose stage an interrupt voided.
        self._interrupted: tuple[str, bool] | None = None
        self._last_start: float | None = None
        self._ran = 0  # epochs this driver process ran: its first ones carry start-up cost

    def run(self, batch: DataFrame, epoch: int) -> EpochDone:
        """Fixes the epoch's plan, runs it, logs the outcome and sends metrics and acks."""
        started = time.time()
        interval_ms = (started - self._last_start) * 1000.0 if self._last_start else None
        self._last_start = started
        self._attempt_start = started
        plan = self.planner.plan(epoch, batch)
        plan, config, result, attempts = self._attempts(batch, epoch, plan)
        self.planner.log.write_outcome(epoch, epoch_outcome(result, self.graph.key_groups))
        ended = time.time()
        batch_ms = (ended - started) * 1000.0
        # The epoch under the plan it committed: from the interrupt of a void attempt.
        last_attempt_ms = (ended - self._attempt_start) * 1000.0
        self._weigh(plan, config, result, attempts, batch_ms, last_attempt_ms)
        # The epoch is committed: its acks can say when the change took effect.
        self.deliveries.acks(plan["acks"], ended_at_ms=ended * 1000.0)
        # What is read now (the sources' load); the tasks' run times, read back from
        # Spark's status store once its listener has them, are left to the deliveries'
        # thread: they would hold the next epoch ~15-25 ms each.
        sources = self._sources(batch, epoch, plan, result, interval_ms or batch_ms)
        extra = {"driver_epoch": self._ran, "attempts": attempts,
                 "last_attempt_ms": round(last_attempt_ms, 1)}
        self.deliveries.metrics(epoch, functools.partial(
            self._metrics, epoch, plan, config, result, batch_ms, interval_ms or batch_ms,
            sources, self.clock.times(), ended * 1000.0, extra))
        self._ran += 1
        return EpochDone(config, bool(plan.get("stop")))

    def interrupt(self, command: Command) -> bool:
        """Interrupts the running epoch for ``command`` (a rescale or rebalance of a keyed
        operator whose stage has not finished in it), so that the epoch runs again with
        the command applied; True if it will. The stage is cancelled unless letting it end
        and replaying it ends the epoch sooner (see the module's doc)."""
        if command.kind not in WORKLOAD_KINDS or command.operator not in self._keyed:
            return False
        op_id, config, emits = command.operator, self._config, self._emits(command.operator)
        if command.parallelism is not None:  # its routing compiled now, not by its epoch
            compile_ahead(self.planner.spark, op_id, command.parallelism,
                          f"streamscale-{self.planner.run_id}:routing-code")
        cancel = True
        if op_id in config:
            old = config[op_id].parallelism
            new = command.parallelism if command.parallelism is not None else old
            elapsed_ms = (time.time() - self._attempt_start) * 1000.0
            cancel = self.costs.cancel(op_id, old, new, elapsed_ms, emits)
        taken = self.clock.interrupt(op_id, cancel=cancel)
        if taken:
            self._interrupted = (op_id, emits)
        return taken

    def _emits(self, op_id: str, closes: dict[str, bool] | None = None) -> bool:
        """Whether ``op_id`` may emit rows in the running attempt's epoch (or in the one
        whose plan's ``closes`` is given): a window aggregate only when the epoch closes
        one of its windows, a dedupe or a join always."""
        closes = self._closes if closes is None else closes
        return (self.graph.operator(op_id).type != "window_aggregate"
                or closes.get(op_id, True))

    def _weigh(self, plan: dict[str, Any], config: RunConfig, result: EpochResult,
               attempts: int, batch_ms: float, last_attempt_ms: float) -> None:
        """Keeps what the epoch tells ``costs``: a whole epoch of each keyed operator, or
        the replay that ended it (the interrupted operator's stage replayed key groups: its
        void attempt ran the stage to its end)."""
        if attempts == 1:
            closes = plan.get("closes", {})
            for op_id in self._keyed & set(config):
                self.costs.epoch_ran(op_id, config[op_id].parallelism,
                                     self._emits(op_id, closes), batch_ms)
        elif self._interrupted is not None:
            op_id, emits = self._interrupted
            reports = result.stage_reports.get(op_id, [])
            if any(r.get("groups_replayed", 0) for r in reports):
                self.costs.replayed(op_id, emits, last_attempt_ms)
        self._interrupted = None

    def _attempts(
        self, batch: DataFrame, epoch: int, plan: dict[str, Any]
    ) -> tuple[dict[str, Any], RunConfig, EpochResult, int]:
        """Runs the epoch's plan until an attempt is not interrupted; after an interrupt,
        the plan is the interrupted one with the commands picked up since applied."""
        earlier = EarlierAttempts()
        try:
            for attempt in range(MAX_ATTEMPTS):
                config = {op: OperatorConfig.from_dict(c) for op, c in plan["config"].items()}
                self._config, self._closes = config, dict(plan.get("closes", {}))
                self.clock.begin(epoch, attempt, interruptible=attempt < MAX_ATTEMPTS - 1)
                try:
                    result = self._pipeline(batch, epoch, plan, config, earlier)
                    return plan, config, result, attempt + 1
                except EpochInterrupted:
                    # The void attempt ends here; what follows is the new plan's.
                    self._attempt_start = time.time()
                    plan = self.planner.replan(epoch, batch, plan)
                finally:
                    self.clock.end()
        finally:
            earlier.release()  # a void attempt's output the last one did not take
        raise AssertionError("the last attempt cannot be interrupted")

    def _pipeline(self, batch: DataFrame, epoch: int, plan: dict[str, Any],
                  config: RunConfig, earlier: EarlierAttempts) -> EpochResult:
        ranges = plan.get("sources", {})
        frames = clock_source_rows(
            self.planner.spark, self.graph, self.planner.start_ms, ranges,
            {op: config[op].parallelism for op in ranges},
        )
        pipeline = EpochPipeline(
            self.graph, config, epoch, plan["watermarks"], self.planner.store, self.sinks,
            source_frames=frames, clock=self.clock, closes=plan.get("closes", {}),
            earlier=earlier,
            source_counts={op: end - first for op, (first, end) in ranges.items()},
            plan=self.planner.running_plan(plan["config"]),
        )
        return pipeline.run(batch)

    def _sources(self, batch: DataFrame, epoch: int, plan: dict[str, Any],
                 result: EpochResult, interval_ms: float) -> dict[str, Any]:
        """Each source's load at the end of the epoch, with its broker lags, if any."""
        lags = broker_lags(self.graph, self.planner.options.checkpoint, epoch)
        return {
            "figures": {
                **self.readings.sources(epoch, plan.get("sources", {}), batch, interval_ms),
                **self.readings.brokers(lags, result, interval_ms),
            },
            "report": broker_report(lags, result.dead_letters),
        }

    def _metrics(self, epoch: int, plan: dict[str, Any], config: RunConfig,
                 result: EpochResult, batch_ms: float, interval_ms: float,
                 sources: dict[str, Any], times: AttemptTimes, ended_ms: float,
                 extra: dict[str, Any]) -> dict[str, Any]:
        metrics = epoch_metrics(
            self.planner.run_id, epoch, self.graph, config, result, batch_ms, interval_ms,
            sources["figures"], times, watermarks=plan["watermarks"], ended_ms=ended_ms,
        )
        metrics.update(sources["report"])
        metrics.update(extra)
        return metrics


def epoch_outcome(result: EpochResult, key_groups: int) -> dict[str, Any]:
    """What the next epoch's plan needs of this one: each keyed operator's newest event
    time and its rows per key group (the loads a rebalance weighs)."""
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
