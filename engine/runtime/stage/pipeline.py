"""Evaluates the job graph on one epoch's rows: stateless SQL, VSN stages and sinks."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from engine.dag import JobGraph
from engine.planner import PhysicalPlan
from engine.runtime.control.run_config import RunConfig
from engine.runtime.errors import UnsupportedJobError
from engine.runtime.io.broker.read_ahead import BrokerRows
from engine.runtime.io.sinks import Sink
from engine.runtime.operators.dedupe import parse_dedupe_spec
from engine.runtime.operators.join import parse_join_spec
from engine.runtime.operators.window_spec import WINDOW_END, parse_window_spec
from engine.runtime.spark.frames import (
    Frame,
    QuantilesRead,
    columns_of,
    empty_of,
    observation_name,
    observe_time_quantiles,
    observed,
    to_spark,
    union,
)
from engine.runtime.stage.regions import EpochJobs, stateless_chain
from engine.runtime.stage.stateless import STATELESS_TYPES, apply_stateless
from engine.runtime.stage.vsn_stage import (
    StageEpoch,
    run_dedupe_stage,
    run_join_stage,
    run_window_stage,
)
from engine.runtime.state import StoreSpec

# The order-preserving merge's sequence number: a row's position in what entered its region.
SEQUENCE = "__seq"

# How long the count of an operator whose rows an ended action read may take to be reported.
SETTLE_S = 2.0


@dataclass
class EpochResult:
    """What one epoch did, for metrics and the epoch log."""

    stage_reports: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rows_out: dict[str, int | None] = field(default_factory=dict)
    sink_rows: dict[str, int] = field(default_factory=dict)
    latency_ms: dict[str, float | None] = field(default_factory=dict)
    dead_letters: dict[str, dict[str, Any]] = field(default_factory=dict)
    sink_wall_ms: dict[str, float] = field(default_factory=dict)
    instances: dict[str, int] = field(default_factory=dict)
    """Partitions the rows of each stateless operator and clock source ran on."""
    samples: dict[str, Frame] = field(default_factory=dict)
    """The rows each operator named in the pipeline's ``sampled`` emitted."""


@dataclass
class EpochPipeline:
    """One epoch of ``graph`` under ``config``; ``watermarks`` in event-time micros."""

    graph: JobGraph
    config: RunConfig
    epoch: int
    watermarks: Mapping[str, int | None]
    store: StoreSpec
    sinks: dict[str, Sink]
    plan: PhysicalPlan
    """The planner's plan of ``config`` (``running_plan``): how each region's rows are split
    and merged."""
    source_frames: dict[str, DataFrame | BrokerRows] = field(default_factory=dict)
    """Every source's rows of the epoch, as its plan took them."""
    source_counts: dict[str, int] = field(default_factory=dict)
    """The rows of each clock source in ``source_frames`` (its planned range's length)."""
    clock: EpochJobs | None = None
    closes: Mapping[str, bool] = field(default_factory=dict)
    """Whether each window aggregate's watermark passes a window's end in the epoch (the
    plan's ``closes``); one not named may."""
    sampled: frozenset[str] = frozenset()
    """Operators whose rows the caller takes a sample of after the epoch: their frames are
    in the result and what the epoch cached stays until the caller's ``release``."""
    _observations: dict[str, Observation] = field(default_factory=dict)
    _cached: list[DataFrame] = field(default_factory=list)
    _partitions: dict[str, int | None] = field(default_factory=dict)
    _read_by: list[str] = field(default_factory=list)
    """The keyed operators and sinks whose Spark action read their input."""

    def run(self, batch: DataFrame) -> EpochResult:
        """Builds every operator's DataFrame, runs the VSN stages, commits the sinks.
        What a stage emits or a sink writes is computed once, cached on the executors for
        the epoch, and never collected here; the end-to-end latency is observed by the
        sinks' own writes."""
        result = EpochResult()
        frames: dict[str, Frame] = {}
        latency_inputs: list[QuantilesRead] = []
        ran = False
        try:
            for op_id in self.graph.topological_order():
                frames[op_id] = self._evaluate(op_id, batch, frames, result, latency_inputs)
            result.latency_ms = _latency(latency_inputs, time.time())
            ran = True
        finally:
            # A sampled frame may read a keyed operator's cached output: computed again, its
            # instances would run again.
            if not (ran and self.sampled):
                self.release()
        result.samples = {op: _unsequenced(frames[op]) for op in self.sampled}
        self._read_observations(result)
        return result

    def release(self) -> None:
        """Releases what the epoch cached on the executors."""
        for cached in self._cached:
            cached.unpersist()
        self._cached.clear()

    def _evaluate(
        self,
        op_id: str,
        batch: DataFrame,
        frames: dict[str, Frame],
        result: EpochResult,
        latency_inputs: list[QuantilesRead],
    ) -> Frame:
        op = self.graph.operator(op_id)
        params = self.config[op_id].params
        spark = batch.sparkSession
        if op.type.startswith("source."):
            rows = self.source_frames[op_id]
            if op_id in self.source_counts:  # a clock source: its row range over its parallelism
                self._partitions[op_id] = result.instances[op_id] = self.config[op_id].parallelism
                # One row per id of its planned range: counted without an observation,
                # which would cost the driver a plan step and every row an accumulator.
                result.rows_out[op_id] = self.source_counts[op_id]
                return rows
            self._partitions[op_id] = None  # split as Spark reads it
            if not isinstance(rows, BrokerRows):
                return self._observe(op_id, rows)
            # Counted as the driver decoded them: no observation costs every row.
            result.rows_out[op_id], result.dead_letters[op_id] = rows.entries, rows.dead_letters
            if self._jobs_reading(op_id) == 1:
                return rows.frame
            # Several of the epoch's Spark jobs read the source; a broker is read once,
            # the rows are kept on the executors for the epoch. Read by one job, they
            # are not: a cache would copy every row once more.
            self._cached.append(rows.frame.persist(StorageLevel.MEMORY_AND_DISK))
            return self._cached[-1]
        parents = [frames[p] for p in self.graph.parents(op_id)]
        if len(parents) > 1:  # no order across the inputs of a union or a join
            parents = [_unsequenced(p) for p in parents]
        if op.type == "join":  # two inputs kept apart: the first edge is the left one
            sides = (to_spark(spark, parents[0]), to_spark(spark, parents[1]))
            return self._keyed(op_id, run_join_stage, parse_join_spec(op_id, params), sides, result)
        inputs = union(spark, parents)
        if op.type in STATELESS_TYPES:
            inputs = self._enter_region(op_id, to_spark(spark, inputs), result.instances)
            return self._observe(op_id, apply_stateless(op.type, params, inputs))
        if op.type in _SINGLE_INPUT_STAGES:
            parse, stage_fn = _SINGLE_INPUT_STAGES[op.type]
            rows = to_spark(spark, _unsequenced(inputs))
            return self._keyed(op_id, stage_fn, parse(op_id, params), rows, result)
        if op.type.startswith("sink."):
            if isinstance(inputs, DataFrame) and SEQUENCE in inputs.columns:
                # The order-preserving merge: rows reach the sink in the order they entered
                # the parallel region(s), as a sequential run would write them.
                inputs = inputs.orderBy(SEQUENCE).drop(SEQUENCE)
            # A sink's write is its input's only action in the epoch (its latency observed
            # on it), so the input is not cached for it.
            written = inputs
            column = _event_time_column(inputs)
            if column is not None:
                written, quantiles = observe_time_quantiles(
                    inputs, column, f"latency_{op_id}_{self.epoch}")
                latency_inputs.append(quantiles)
            started = time.perf_counter()
            with self._action(op_id):
                result.sink_rows[op_id] = self.sinks[op_id].write_epoch(written, self.epoch)
            if isinstance(written, DataFrame) and result.sink_rows[op_id] != 0:
                self._read_by.append(op_id)  # not a replayed epoch the sink skipped
            result.sink_wall_ms[op_id] = (time.perf_counter() - started) * 1000.0
            return inputs
        raise UnsupportedJobError(f"operator {op_id!r}: type {op.type!r} is not supported yet")

    def _enter_region(self, op_id: str, rows: DataFrame, instances: dict[str, int]) -> DataFrame:
        """A stateless operator's rows, split as its region is planned (their partitions
        noted in ``instances``): the first operator of a region splits its input round-robin
        over the region's instances (unless the rows already come in that many partitions),
        the others continue in the same partitions. Where order matters downstream, rows are
        numbered before the split."""
        region = self.plan.region_of(op_id)
        parents = self.graph.parents(op_id)
        known = _total([self._partitions.get(p) for p in parents])
        if region.operators[0] != op_id:
            self._partitions[op_id] = instances[op_id] = known or region.parallelism
            return rows
        if region.ordered_merge and SEQUENCE not in rows.columns:
            rows = rows.withColumn(SEQUENCE, F.monotonically_increasing_id())
        if known != region.parallelism:
            rows = rows.repartition(region.parallelism)
        self._partitions[op_id] = instances[op_id] = region.parallelism
        return rows

    def _keyed(
        self, op_id: str, stage_fn: Any, spec: Any, inputs: Any, result: EpochResult,
    ) -> Frame:
        """Runs a keyed operator's VSN stage with this epoch's assignment."""
        config = self.config[op_id]
        self._partitions[op_id] = config.parallelism
        assert config.owners is not None
        with self._action(op_id):
            at = StageEpoch(self.epoch, self.graph.key_groups, config.owners,
                            config.parallelism, self.watermarks.get(op_id), self.store,
                            closes=self.closes.get(op_id, True))
            stage = stage_fn(spec, inputs, at)
            self._read_by.append(op_id)
            if stage.kept:
                self._cached.append(stage.cached)
        result.stage_reports[op_id] = stage.reports
        result.rows_out[op_id] = sum(r["rows_out"] for r in stage.reports)
        if result.rows_out[op_id] == 0:
            # The instances emitted nothing (their reports count replayed rows too): what
            # follows gets no rows without a Spark job to find that out.
            return empty_of(stage.cached.sparkSession, stage.schema)
        return stage.rows()

    @contextmanager
    def _action(self, op_id: str) -> Iterator[None]:
        """Spark jobs of the block, tagged for ``op_id``'s region (see ``regions``)."""
        with self.clock.action(op_id) if self.clock is not None else nullcontext():
            yield

    def _observe(self, op_id: str, df: DataFrame) -> DataFrame:
        observation = Observation(observation_name(f"rows_{op_id}_{self.epoch}"))
        self._observations[op_id] = observation
        return df.observe(observation, _row_count())

    def _jobs_reading(self, op_id: str) -> int:
        """How many of the epoch's Spark jobs compute ``op_id``'s rows: one per path from
        it through stateless operators to a keyed operator or a sink (their actions; a
        keyed operator's output is kept for what follows it)."""
        return sum(self._jobs_reading(child)
                   if self.graph.operator(child).type in STATELESS_TYPES else 1
                   for child in self.graph.children(op_id))

    def _read_observations(self, result: EpochResult) -> None:
        # Only observations an action filled are read (see ``observed``); those of the
        # operators whose rows an action of the epoch read are waited for, as Spark's
        # listener reports them a moment after the action's job ended.
        settle = {op for read in self._read_by for op in stateless_chain(self.graph, read)}
        for op_id, observation in self._observations.items():
            done = observed(observation, wait_s=SETTLE_S if op_id in settle else 0.0)
            result.rows_out[op_id] = int(observation.get["rows"]) if done else None


_SINGLE_INPUT_STAGES = {
    "window_aggregate": (parse_window_spec, run_window_stage),
    "dedupe": (parse_dedupe_spec, run_dedupe_stage),
}


@lru_cache(maxsize=1)
def _row_count() -> Column:
    """The observed row count, built once per process (a column is a JVM object)."""
    return F.count(F.lit(1)).alias("rows")


def _total(partitions: list[int | None]) -> int | None:
    """Partitions of the union of frames (Spark concatenates them); None if one is unknown."""
    if not partitions or any(p is None for p in partitions):
        return None
    return sum(p for p in partitions if p is not None)


def _unsequenced(frame: Frame) -> Frame:
    if isinstance(frame, DataFrame) and SEQUENCE in frame.columns:
        return frame.drop(SEQUENCE)
    return frame


def _event_time_column(frame: Frame) -> str | None:
    """The column a sink's latency is measured from: a window's end (when its result became
    final in event time), else the rows' event time; None if the rows have neither."""
    names = columns_of(frame)
    return WINDOW_END if WINDOW_END in names else ("event_time" if "event_time" in names else None)


def _latency(inputs: list[QuantilesRead], commit_s: float) -> dict[str, float | None]:
    """End-to-end latency (event time to sink commit) p50/p99/max over the sinks' rows."""
    stats = [found for found in (read() for read in inputs) if found is not None]
    return {name: round((commit_s * 1e6 - min(s[i] for s in stats)) / 1000.0, 1) if stats
            else None for i, name in enumerate(("p50", "p99", "max"))}
