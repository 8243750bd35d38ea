"""Measured regions: stateless operators that Spark fuses into the stages of one action.

Keyed operators run in the VSN instances, which time themselves. Everything stateless runs
inside Spark stages: the chain that feeds a keyed operator runs in the map side of that
operator's shuffle, the chain that feeds a sink in the sink's write. Such a chain cannot be
timed per operator, so it is reported as one region, named by its operators, with the
run time of the Spark tasks that executed it (``executorRunTime`` from Spark's status
store). Each action of an epoch runs in a job group named for the operator it feeds.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from engine.dag import JobGraph, state_kind_of
from engine.runtime.errors import StreamRuntimeError

_SETTLE_S = 1.0  # how long to wait for Spark's listener to report finished stages
# A keyed stage is cancelled only while its routing has at least this long left to run, as
# its recent epochs' routing took (and at least this share of it): Spark's status tracker
# reports the instances' start a little behind them, and a cancel that reaches them kills
# their Python workers, which the next attempt starts again (~1 s for an epoch of 3
# instances on 2 cores, measured in ``bench rescale``).
_ROUTING_LEFT_MS = 50.0
_ROUTING_LEFT_SHARE = 0.25
_ROUTING_EPOCHS = 5  # recent epochs whose routing times are looked up


@dataclass(frozen=True)
class Region:
    """Operators fused into the Spark stages that feed ``consumer``; ``includes_consumer``
    when the consumer runs in those stages too (a sink), not in VSN instances (keyed)."""

    consumer: str
    operators: tuple[str, ...]
    includes_consumer: bool

    @property
    def region_id(self) -> str:
        """The region's name: its operators joined by ``+``."""
        return "+".join(self.operators)


def fused_regions(graph: JobGraph) -> list[Region]:
    """The regions of a graph: for each keyed operator and each sink, the stateless chain
    that feeds it (up to a source or a keyed operator). Empty chains are left out."""
    regions = []
    for op in graph.operators:
        keyed = state_kind_of(op) != "stateless"
        if not (keyed or op.id in graph.sinks()):
            continue
        chain = _stateless_chain(graph, op.id)
        members = chain if keyed else [*chain, op.id]
        if members:
            regions.append(Region(op.id, tuple(members), not keyed))
    return regions


def _stateless_chain(graph: JobGraph, op_id: str) -> list[str]:
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


class EpochInterrupted(StreamRuntimeError):
    """Raised out of an epoch's action that ``StageClock.interrupt`` cancelled (or that
    finished as the interrupt came): the epoch's attempt is void and it runs again."""


class StageClock:
    """Tags an epoch's Spark actions by the operator they feed, reads back the run time of
    their tasks, and interrupts the epoch's attempt for a reconfiguration."""

    def __init__(self, spark: SparkSession, prefix: str) -> None:
        self._sc = spark.sparkContext
        self._prefix = prefix
        self.epoch = -1
        self.attempt = 0
        self._lock = threading.Lock()
        self._open = False  # an attempt runs and may be interrupted
        self._running: str | None = None  # the operator whose action runs now
        self._cancellable = False  # whether its Spark jobs may be cancelled
        self._done: set[str] = set()  # operators whose actions this attempt finished
        self._interrupted = False
        self._void_after: str | None = None  # an interrupt that lets this action end first

    def _group(self, op_id: str, epoch: int | None = None) -> str:
        """The job group of ``op_id``'s action in the current attempt, or in the first
        attempt of ``epoch``."""
        if epoch is not None:
            return f"{self._prefix}:{epoch}:{op_id}"
        suffix = f":{self.attempt}" if self.attempt else ""
        return f"{self._prefix}:{self.epoch}{suffix}:{op_id}"

    @property
    def running(self) -> str | None:
        """The operator whose action runs now, if any."""
        with self._lock:
            return self._running

    def begin(self, epoch: int, attempt: int, interruptible: bool = True) -> None:
        """An attempt of ``epoch`` starts (the first is 0); ``interruptible`` if
        ``interrupt`` may void it."""
        with self._lock:
            self.epoch, self.attempt = epoch, attempt
            self._open, self._running, self._done = interruptible, None, set()
            self._interrupted, self._void_after = False, None

    def end(self) -> None:
        """The attempt ended: nothing interrupts it any more."""
        with self._lock:
            self._open = False

    def interrupt(self, op_id: str, cancel: bool = True) -> bool:
        """Voids the running attempt unless ``op_id``'s action in it has finished (or it
        may not be interrupted). With ``cancel``, the action running now has its Spark jobs
        cancelled and raises EpochInterrupted, as does the next one to start if none runs.
        Without, the attempt runs on to the end of ``op_id``'s action, which raises it
        then (a stage whose next attempt replays it from the store for less than running
        it again costs). Safe to call from any thread; True if the attempt will end so."""
        with self._lock:
            if not self._open or self._interrupted or op_id in self._done:
                return False
            self._interrupted = True
            self._void_after = None if cancel else op_id
            attempt = (self.epoch, self.attempt)
        if cancel:
            threading.Thread(target=self._cancel_running, args=(attempt,),
                             name="epoch-interrupt", daemon=True).start()
        return True

    def _cancel_running(self, attempt: tuple[int, int]) -> None:
        """Cancels the running action's job group, its jobs running and those it submits
        later: an action may submit one after another, and one still planning its query
        (30-65 ms for a keyed stage's, on the driver) has submitted none yet; a job
        submitted after the cancel fails before any of its tasks starts. Only while a
        keyed stage routes its rows: once its instances run, cancelling would kill their
        Python workers (the next attempt would start new ones, ~0.3 s each), so the
        attempt is left to end; the key groups it commits are replayed by the next one.
        Between two actions there is none to cancel, and none starts after the interrupt:
        ``action`` ends the attempt before it runs anything."""
        with self._lock:
            if (self.epoch, self.attempt) != attempt or not self._open or self._running is None:
                return  # the interrupted attempt has ended, or no action runs in it
            op_id, cancellable = self._running, self._cancellable
            group = self._group(op_id)
        if cancellable and not self._instances_started(group) and not self._routing_ends_soon(
                op_id, group, attempt[0]):
            self._sc._jsc.sc().cancelJobGroupAndFutureJobs(group)

    def _routing_ends_soon(self, op_id: str, group: str, epoch: int) -> bool:
        """Whether the routing of ``group``'s running job has less left to run than the
        margin (``_ROUTING_LEFT_MS``, ``_ROUTING_LEFT_SHARE``), as long as the recent epochs'
        routing of the same operator took (the median); False with none to go by, or no
        job submitted yet (a job submitted after the cancel fails before its tasks)."""
        started = [start for start, _ in self._routing_times(group)]
        if not started:
            return False
        took = [end - start for e in range(epoch - 1, max(epoch - 1 - _ROUTING_EPOCHS, -1), -1)
                for start, end in self._routing_times(self._group(op_id, e))
                if end is not None]
        if not took:
            return False
        typical = statistics.median(took)
        left = max(_ROUTING_LEFT_MS, _ROUTING_LEFT_SHARE * typical)
        return time.time() * 1000.0 - min(started) > typical - left

    def _routing_times(self, group: str) -> list[tuple[float, float | None]]:
        """(routing stages' submission, instances' submission or None) in ms of each job
        of ``group`` with a shuffle, as Spark's status tracker has them."""
        stages = self._sc._jsc.statusTracker()
        found = []
        for ids in job_stages(self._sc, group):
            if len(ids) < 2:
                continue
            *routing, instances = [stages.getStageInfo(s) for s in ids]
            submitted = [r.submissionTime() for r in routing if r is not None]
            submitted = [t for t in submitted if t > 0]
            if not submitted:
                continue
            end = instances.submissionTime() if instances is not None else -1
            found.append((float(min(submitted)), float(end) if end > 0 else None))
        return found

    def _instances_started(self, group: str) -> bool:
        """Whether a job of ``group`` has written its shuffle: the stages before its last
        (a keyed stage's instances) have no task left to run, or the last has begun. As
        Spark's status tracker reports it, a little behind the tasks themselves."""
        tracker = self._sc.statusTracker()
        for ids in job_stages(self._sc, group):
            found = [tracker.getStageInfo(s) for s in ids]
            stages = [s for s in found if s is not None]
            if len(stages) < 2 or len(stages) < len(found):
                continue
            *routing, instances = stages
            if instances.numActiveTasks or instances.numCompletedTasks or all(
                s.numCompletedTasks >= s.numTasks for s in routing
            ):
                return True
        return False

    @contextmanager
    def action(self, op_id: str, cancellable: bool = False) -> Iterator[None]:
        """Runs the block's Spark jobs in the job group of ``op_id`` in the current epoch;
        raises EpochInterrupted instead of the block's result if the attempt was
        interrupted before or while it ran. An interrupt cancels the jobs of a
        ``cancellable`` action (a keyed stage) until its instances start; any other action
        runs to its end first. An interrupt that lets an operator's action end first
        (``interrupt(op, cancel=False)``) voids the attempt at that action's end only."""
        with self._lock:
            if self._interrupted and self._void_after is None:
                raise EpochInterrupted(f"epoch {self.epoch} interrupted before {op_id!r}")
            self._running, self._cancellable = op_id, cancellable
        self._sc.setJobGroup(self._group(op_id), f"{self._prefix} epoch {self.epoch} {op_id}")
        try:
            yield
        except Exception as exc:
            if self._finish(op_id):
                raise EpochInterrupted(f"epoch {self.epoch} interrupted in {op_id!r}") from exc
            raise
        else:
            if self._finish(op_id):
                raise EpochInterrupted(f"epoch {self.epoch} interrupted in {op_id!r}")
        finally:
            self._sc.setJobGroup(f"{self._prefix}:other", f"{self._prefix} other")

    def _finish(self, op_id: str) -> bool:
        """Marks ``op_id``'s action finished; whether the attempt is void from here."""
        with self._lock:
            self._running = None
            self._done.add(op_id)
            if self._void_after is not None:
                return op_id == self._void_after
            return self._interrupted

    def times(self) -> AttemptTimes:
        """The task times of the current attempt, readable after it ended: the next
        attempt's actions run in job groups of their own."""
        return AttemptTimes(self._sc, self._group(""))


def job_stages(sc: Any, group: str) -> list[list[int]]:
    """The stage ids of each job of job group ``group``, in order (a keyed stage's
    instances last), as Spark's status tracker has them."""
    tracker = sc.statusTracker()
    found = []
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        found.append(sorted(int(s) for s in (info.stageIds if info is not None else [])))
    return found


@dataclass(frozen=True)
class AttemptTimes:
    """Reads back the run time of one attempt's tasks from Spark's status store, by the
    job groups its actions ran in (``group_prefix`` + the operator)."""

    sc: Any
    group_prefix: str

    def busy_ms(self, op_id: str, skip_last_stage: bool) -> list[float] | None:
        """Task run time per partition over the stages of ``op_id``'s jobs (the final stage
        left out when it is the VSN instances'); None if Spark ran no job for it."""
        stages: list[int] = []
        for ids in job_stages(self.sc, self.group_prefix + op_id):
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
