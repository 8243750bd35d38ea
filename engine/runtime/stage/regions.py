"""Measured regions: stateless operators that Spark fuses into the stages of one action.

Keyed operators run in the VSN instances, which time themselves. Everything stateless runs
inside Spark stages: the chain that feeds a keyed operator runs in the map side of that
operator's shuffle, the chain that feeds a sink in the sink's write. Such a chain cannot be
timed per operator, so it is reported as one region, named by its operators, with the
run time of the Spark tasks that executed it (``executorRunTime`` from Spark's status
store). Each action of an epoch runs in a job group named for the operator it feeds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from engine.dag import JobGraph, state_kind_of

_SETTLE_S = 1.0  # how long to wait for Spark's listener to report finished stages


@dataclass(frozen=True)
class FusedRegion:
    """Operators fused into the Spark stages that feed ``consumer``; ``includes_consumer``
    when the consumer runs in those stages too (a sink), not in VSN instances (keyed).
    A unit of measurement (its tasks' run time), not the planner's ``Region`` (a unit of
    parallel execution)."""

    consumer: str
    operators: tuple[str, ...]
    includes_consumer: bool

    @property
    def region_id(self) -> str:
        """The region's name: its operators joined by ``+``."""
        return "+".join(self.operators)


def fused_regions(graph: JobGraph) -> list[FusedRegion]:
    """The regions of a graph: for each keyed operator and each sink, the stateless chain
    that feeds it (up to a source or a keyed operator). Empty chains are left out."""
    regions = []
    for op in graph.operators:
        keyed = state_kind_of(op) != "stateless"
        if not (keyed or op.id in graph.sinks()):
            continue
        chain = stateless_chain(graph, op.id)
        members = chain if keyed else [*chain, op.id]
        if members:
            regions.append(FusedRegion(op.id, tuple(members), not keyed))
    return regions


def stateless_chain(graph: JobGraph, op_id: str) -> list[str]:
    """The stateless operators and sources that feed ``op_id``, up to a keyed operator (whose
    output an epoch keeps): what an action for ``op_id`` computes, in topological order."""
    found: list[str] = []
    stack = list(graph.parents(op_id))
    while stack:
        parent = stack.pop()
        if parent in found or state_kind_of(graph.operator(parent)) != "stateless":
            continue
        found.append(parent)
        stack.extend(graph.parents(parent))
    order = graph.topological_order()
    return sorted(found, key=order.index)


class EpochJobs:
    """Tags an epoch's Spark actions by the operator they feed (a job group each), so that
    the run time of their tasks can be read back once the epoch ended."""

    def __init__(self, spark: SparkSession, prefix: str) -> None:
        self._sc = spark.sparkContext
        self._prefix = prefix
        self.epoch = -1

    def begin(self, epoch: int) -> None:
        """``epoch`` starts: its actions run in job groups of their own."""
        self.epoch = epoch

    @contextmanager
    def action(self, op_id: str) -> Iterator[None]:
        """Runs the block's Spark jobs in the job group of ``op_id`` in the current epoch."""
        self._sc.setJobGroup(self._group(op_id), f"{self._prefix} epoch {self.epoch} {op_id}")
        try:
            yield
        finally:
            self._sc.setJobGroup(f"{self._prefix}:other", f"{self._prefix} other")

    def times(self) -> EpochTimes:
        """The task times of the current epoch, readable after it ended."""
        return EpochTimes(self._sc, self._group(""))

    def _group(self, op_id: str) -> str:
        return f"{self._prefix}:{self.epoch}:{op_id}"


@dataclass(frozen=True)
class EpochTimes:
    """Reads back the run time of one epoch's tasks from Spark's status store, by the
    job groups its actions ran in (``group_prefix`` + the operator)."""

    sc: Any
    group_prefix: str

    def busy_ms(self, op_id: str, skip_last_stage: bool) -> list[float] | None:
        """Task run time per partition over the stages of ``op_id``'s jobs (the final stage
        left out when it is the VSN instances'); None if Spark ran no job for it."""
        tracker = self.sc.statusTracker()
        stages: list[int] = []
        for job in tracker.getJobIdsForGroup(self.group_prefix + op_id):
            info = tracker.getJobInfo(job)
            # A job's stages in order: a keyed stage's instances last.
            ids = sorted(int(s) for s in (info.stageIds if info is not None else []))
            stages += ids[:-1] if skip_last_stage else ids
        if not stages:
            return None
        per_partition: dict[int, float] = {}
        store: Any = self.sc._jsc.sc().statusStore()
        for stage in stages:
            for index, ms in _task_times(store, stage):
                per_partition[index] = per_partition.get(index, 0.0) + ms
        return [round(per_partition[i], 1) for i in sorted(per_partition)]


def _task_times(store: Any, stage: int) -> list[tuple[int, float]]:
    """(partition, executor run time ms) of a stage's tasks, once Spark reports it done."""
    deadline = time.monotonic() + _SETTLE_S
    while True:
        try:
            data = store.lastStageAttempt(stage)
            done = data.status().toString() not in ("ACTIVE", "PENDING")
        except Exception:  # noqa: BLE001 - not reported yet, or skipped (it ran nothing)
            data, done = None, False
        if done or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    if data is None:
        return []
    times = []
    tasks = store.taskList(stage, data.attemptId(), 100_000).iterator()
    while tasks.hasNext():
        task = tasks.next()
        metrics = task.taskMetrics()
        if metrics.isDefined():
            times.append((int(task.index()), float(metrics.get().executorRunTime())))
    return times
