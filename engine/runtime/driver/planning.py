"""An epoch's plan, fixed before it runs: the configuration with the picked-up commands
applied, the watermarks advanced, what it takes of each source and the acks to send.

A plan is written to the epoch log before the epoch runs, so a replayed epoch (after a
crash) runs the same plan; the planner's plan of each configuration is made once. An epoch
with nothing to take and no command is not planned: the run is idle until data comes."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from engine.dag import JobGraph
from engine.planner import PhysicalPlan, plan_job
from engine.runtime.control.epoch_plan import EpochOutcome, EpochPlan
from engine.runtime.control.listener import ControlListener
from engine.runtime.control.reconfigure import apply_commands
from engine.runtime.control.run_config import LogicCheck, RunConfig, initial_config, running_plan
from engine.runtime.driver.epoch_log import EpochLog
from engine.runtime.driver.options import RunOptions, save_run_info
from engine.runtime.io.broker.read_ahead import BrokerRows
from engine.runtime.io.source_load import ClockSource, build_meters
from engine.runtime.io.streams import nothing_taken, source_rows, take
from engine.runtime.io.taken import FilesTaken, SourceTake
from engine.runtime.stage.logic_check import KEYED_SPECS, logic_checker
from engine.runtime.state import StoreSpec


class EpochPlanner:
    """Fixes each epoch's plan from the one before it and the commands picked up since."""

    def __init__(self, graph: JobGraph, spark: SparkSession, options: RunOptions, log: EpochLog,
                 info: dict[str, Any]) -> None:
        self.graph, self.spark, self.options, self.log = graph, spark, options, log
        self.run_id: str = info["run_id"]
        self.start_ms: int = info["start_ms"]
        self.meters = build_meters(graph, self.start_ms, options.epoch_ms,
                                   back_to_back=options.trigger_ms == 0)
        self.clocks = {op: m for op, m in self.meters.items() if isinstance(m, ClockSource)}
        self.store: StoreSpec = options.state_store()
        self.listener: ControlListener | None = None  # set once the run starts
        self._plans: dict[str, PhysicalPlan] = {}
        self._taken_files: dict[str, set[str]] = {}
        self.graph_digest = graph_digest(graph)

    def plan(self, epoch: int, batch: DataFrame) -> EpochPlan | None:
        """The epoch's logged plan (a replay), else a new one, logged before it runs; None
        when the run is idle (its sources have nothing new, no command came)."""
        logged = self.log.plan(epoch)
        if logged is not None and not self._same_graph(logged):
            logged = self._upgraded(epoch, logged)
        return logged or self._new_plan(epoch, batch)

    def _same_graph(self, plan: EpochPlan) -> bool:
        """Whether ``plan`` was made for this run's job graph (a plan logged before graphs
        were recorded was)."""
        return plan.graph in (None, self.graph_digest)

    def _upgraded(self, epoch: int, logged: EpochPlan) -> EpochPlan:
        """The replay of an epoch an earlier version of the job planned (a stopped or failed
        run started again on a new version): the same rows of each source, under the new
        graph's configuration. Key groups the first attempt committed keep what it emitted."""
        config = initial_config(plan_job(self.graph))
        watermarks = advance_watermarks(self.graph, config, logged.watermarks, None)
        plan = replace(logged, graph=self.graph_digest, config=config, watermarks=watermarks,
                       closes=windows_closing(self.graph, config, None, {}, watermarks))
        self.log.write_plan(plan)
        return plan

    def running_plan(self, config: RunConfig) -> PhysicalPlan:
        """The planner's plan of the configuration an epoch runs (made once per config)."""
        key = json.dumps({op: c.to_dict() for op, c in config.items()}, sort_keys=True)
        if key not in self._plans:
            self._plans = {key: running_plan(self.graph, config)}
        return self._plans[key]

    def _new_plan(self, epoch: int, batch: DataFrame) -> EpochPlan | None:
        previous = self.log.latest_plan(before=epoch)
        taken: Mapping[str, SourceTake] = {}
        watermarks: Mapping[str, int | None] = {}
        outcome, cursor, before = None, None, None
        if previous is None:
            self._anchor_clock()
        else:
            cursor, watermarks, taken = previous.cursor, previous.watermarks, previous.sources
            outcome = self.log.outcome(previous.epoch)
            # A new version of the job continues from the run's state with its own
            # configuration (its state safety was checked before it started).
            before = previous.config if self._same_graph(previous) else None
        config = before if before is not None else initial_config(plan_job(self.graph))
        sources = self._take(taken)
        assert self.listener is not None
        if previous is not None and self._idle(sources) and not self.listener.pending():
            return None
        advanced = advance_watermarks(self.graph, config, watermarks, outcome)
        commands = self.listener.drain()
        applied, acks, stop = apply_commands(
            self.graph, config, commands, epoch, outcome.kg_rows if outcome else {},
            self._logic_check(config, batch))
        plan = EpochPlan(
            epoch=epoch, config=applied, sources=sources, watermarks=advanced,
            closes=windows_closing(self.graph, applied, before, watermarks, advanced),
            cursor=commands[-1].cursor if commands else cursor, acks=tuple(acks), stop=stop,
            graph=self.graph_digest,
        )
        self.log.write_plan(plan)
        self._record_files(sources)
        return plan

    def _logic_check(self, config: RunConfig, batch: DataFrame) -> LogicCheck:
        """Checks a logic change against the epoch's input; its schemas are analysed only
        when a logic change asks (a rescale's epoch does not pay for them)."""
        checker: list[LogicCheck] = []

        def check(op_id: str, params: dict[str, Any]) -> None:
            if not checker:
                empty = {op: nothing_taken(self.graph, op) for op in self.graph.sources()}
                shapes = source_rows(
                    self.spark, self.graph, self.start_ms, empty, dict.fromkeys(empty, 1))
                frames = {op: rows.frame if isinstance(rows, BrokerRows) else rows
                          for op, rows in shapes.items()}
                checker.append(logic_checker(self.graph, config, batch, frames))
            checker[0](op_id, params)

        return check

    def _anchor_clock(self) -> None:
        """Before the first epoch: the clock sources' rows fall due from one epoch ago, not
        from when the run was created (Spark's start-up is not load the run fell behind on)."""
        self.start_ms = int(time.time() * 1000) - self.options.epoch_ms
        save_run_info(self.options, {"run_id": self.run_id, "start_ms": self.start_ms})
        for clock in self.clocks.values():
            clock.start_ms = self.start_ms

    def _take(self, taken: Mapping[str, SourceTake]) -> dict[str, SourceTake]:
        """What the epoch being planned takes of each source: from where the last one
        ended, what is new now (due, for a clock source), up to the source's cap."""
        now_ms = time.time() * 1000.0
        return {op: take(self.graph, op, taken.get(op), self.clocks.get(op), now_ms,
                         self._files_taken(op), self.spark)
                for op in self.graph.sources()}

    def _idle(self, sources: Mapping[str, SourceTake]) -> bool:
        """Whether an epoch would take nothing of any source: one of a run that reads only
        directories and brokers (a clock source has rows due every epoch)."""
        return not self.clocks and not any(part.count for part in sources.values())

    def _files_taken(self, op_id: str) -> set[str]:
        if self.graph.operator(op_id).type != "source.files":
            return set()
        if op_id not in self._taken_files:
            self._taken_files[op_id] = self.log.files_taken(op_id)
        return self._taken_files[op_id]

    def _record_files(self, sources: Mapping[str, SourceTake]) -> None:
        """Keeps the files a logged plan took as taken, for every later epoch."""
        for op_id, part in sources.items():
            if isinstance(part, FilesTaken) and part.files:
                self.log.record_files(op_id, part.files)
                self._files_taken(op_id).update(part.files)


def graph_digest(graph: JobGraph) -> str:
    """Names the job graph a plan was made for: a run started on a new version of its job
    sees that its logged plans are another graph's."""
    text = json.dumps(graph.to_dict(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def windows_closing(
    graph: JobGraph, config: RunConfig, before: RunConfig | None,
    watermarks: Mapping[str, int | None], advanced: Mapping[str, int | None],
) -> dict[str, bool]:
    """Whether each window aggregate's watermark passes a window's end this epoch, the
    only way one emits: windows end at ``window + k * slide``, and the epoch before fired
    every timer up to its own watermark. An operator whose parameters changed since the
    epoch before (or with no epoch before) may close any window."""
    closes: dict[str, bool] = {}
    for op in graph.operators:
        if op.type != "window_aggregate":
            continue
        after, prior = advanced.get(op.id), watermarks.get(op.id)
        same = before is not None and before[op.id].params == config[op.id].params
        if after is None or prior is None or not same:
            closes[op.id] = after is not None
            continue
        spec = KEYED_SPECS[op.type].parse(op.id, config[op.id].params)
        # The last window end at or before each watermark, counted in slides.
        closes[op.id] = ((after - spec.window_us) // spec.slide_us
                         > (prior - spec.window_us) // spec.slide_us)
    return closes


def advance_watermarks(
    graph: JobGraph, config: RunConfig, watermarks: Mapping[str, int | None],
    outcome: EpochOutcome | None,
) -> dict[str, int | None]:
    """Each keyed operator's watermark for the next epoch: the newest event time it has
    seen less its watermark delay, never moving back."""
    advanced: dict[str, int | None] = {}
    seen = outcome.max_event_us if outcome else {}
    for op in graph.operators:
        keyed = KEYED_SPECS.get(op.type)
        if keyed is None:
            continue
        delay = keyed.parse(op.id, config[op.id].params).watermark_us
        current = watermarks.get(op.id)
        newest = seen.get(op.id)
        candidate = None if newest is None else newest - delay
        values = [v for v in (current, candidate) if v is not None]
        advanced[op.id] = max(values) if values else None
    return advanced
