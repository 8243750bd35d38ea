"""A run: its epochs, started by the driver's own loop (``loop``).

For each epoch the driver fixes the epoch's plan (picked-up commands applied, watermarks
advanced, what it takes of each source) in the epoch log (``planning``), runs the pipeline,
logs the outcome and sends the metrics and the commands' acks (``epoch``). A replayed epoch
(after a crash) reuses its logged plan, and every write it repeats is skipped by epoch, so the
results are those of a run without the crash.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from engine.dag import JobGraph
from engine.planner import plan_job
from engine.ports import MetricsPublisher, ReconfigurationRecorder
from engine.runtime.control.channel import ControlChannel, MemoryControlChannel
from engine.runtime.control.listener import ControlListener
from engine.runtime.control.messages import WORKLOAD_KINDS, Ack, Command
from engine.runtime.control.outbox import RunDeliveries
from engine.runtime.control.run_config import RunConfig, initial_config
from engine.runtime.driver.epoch import EpochRunner
from engine.runtime.driver.epoch_log import EpochLog
from engine.runtime.driver.loop import EpochLoop
from engine.runtime.driver.options import RunOptions, run_info
from engine.runtime.driver.planning import EpochPlanner
from engine.runtime.errors import DriverSuperseded
from engine.runtime.stage.routing_code import compile_ahead
from engine.runtime.state import StoreSpec

__all__ = ["JobRun", "RunOptions"]


class JobRun:
    """One run of a job graph on Spark; ``start`` returns once its epoch loop runs."""

    def __init__(self, graph: JobGraph, spark: SparkSession, options: RunOptions,
                 publisher: MetricsPublisher, recorder: ReconfigurationRecorder | None = None,
                 channel: ControlChannel | None = None) -> None:
        self.graph, self.spark, self.options = graph, spark, options
        self.channel = channel or MemoryControlChannel()
        self.log = EpochLog(os.path.join(options.checkpoint, "epochs"))
        info = run_info(options)
        self.run_id: str = info["run_id"]
        self.planner = EpochPlanner(graph, spark, options, self.log, info)
        # Acks and metrics leave through queues, off the epoch's path (retried there).
        self.deliveries = RunDeliveries(self.run_id, publisher, recorder)
        self.epochs = EpochRunner(self.planner, self.deliveries)
        self.loop = EpochLoop(spark, options, self.log, self._epoch)
        self.config: RunConfig = initial_config(plan_job(graph))
        self.last_epoch: int | None = None
        self.status = "starting"
        self.error: BaseException | None = None
        self.generation = 0  # the fencing generation this driver took (``start``)
        self._lock = threading.Lock()
        self._listener: ControlListener | None = None

    @property
    def store(self) -> StoreSpec:
        """Where the run keeps its keyed state."""
        return self.planner.store

    @property
    def start_ms(self) -> int:
        """The wall-clock origin of the run's event time (its clock sources' first row)."""
        return self.planner.start_ms

    def start(self) -> None:
        """Starts the control listener and the epoch loop, once the acks of the epochs
        logged as ended are queued again (``_deliver_logged_acks``)."""
        # Taken before anything is read or written: from now on every earlier driver of the
        # run stops at its next epoch (``_check_fence``).
        self.generation = self.channel.take_generation()
        self._deliver_logged_acks()
        latest = self.log.latest_plan(before=2**62)
        cursor = latest.cursor if latest else None
        self._listener = ControlListener(self.channel, cursor, self._malformed,
                                         on_command=self._on_command)
        self._listener.start()
        self.planner.listener = self._listener
        # What the driver holds by now (modules, the session's JVM proxies) lives as long as
        # it does: frozen, a full collection no longer scans it, and a broker source's
        # decoding (tens of thousands of containers a chunk) triggers many.
        gc.collect()
        gc.freeze()
        self.loop.start()
        self.status = "running"

    def _deliver_logged_acks(self) -> None:
        """An epoch's acks leave after its outcome is logged, through a queue: a driver
        killed in between, or one that gave up delivering them (its host down), never sent
        them, and the listener resumes past their commands. The change runs all the same, so
        the acks of every epoch the log kept as ended are sent again, in order, with when the
        epoch ended; the host keeps the first ack of a request and ignores the rest."""
        for _, acks, ended_ms in self.log.ended_acks():
            self.deliveries.acks(acks, ended_at_ms=ended_ms)

    def _malformed(self, ack: Ack) -> None:
        self.deliveries.acks([ack], ended_at_ms=None)

    def _on_command(self, command: Command) -> None:
        # A command starts the next epoch as soon as the running one ends; a rescale's
        # routing to its new parallelism is compiled meanwhile, off that epoch's path.
        if command.kind in WORKLOAD_KINDS and command.operator and command.parallelism:
            compile_ahead(self.spark, command.operator, command.parallelism,
                          f"streamscale-{self.run_id}:routing-code")
        if command.kind != "sample":  # a sample is served by the next epoch when it is due
            self.loop.wake()

    def _epoch(self, batch: DataFrame, epoch: int) -> bool:
        self._check_fence(epoch)
        done = self.epochs.run(batch, epoch)
        if done is None:
            return False
        with self._lock:
            self.config, self.last_epoch = done.config, epoch
            if done.stop:
                self.loop.stop_after = epoch
        return True

    def _check_fence(self, epoch: int) -> None:
        """Refuses the epoch (nothing of it is committed: it is replayed by the driver that
        took over) when a later driver of the run has started since this one."""
        newest = self.channel.newest_generation()
        if newest is not None and newest != self.generation:
            raise DriverSuperseded(
                f"run {self.run_id}: driver generation {self.generation} is superseded by "
                f"generation {newest}; it stops before epoch {epoch} without committing it "
                "(not retried: its successor runs the run)")

    def wait(self, timeout_s: float | None = None) -> str:
        """Blocks until the run stops (stop command, last epoch, failure) or times out;
        returns the status: running (timed out), stopped or failed (see ``error``)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self.loop.running():
            last, done = self.loop.stop_after, self.last_epoch
            if last is not None and done is not None and done >= last:
                self.loop.await_commit(last)
                self.stop()
                break
            if deadline is not None and time.monotonic() > deadline:
                return self.status
            time.sleep(0.05)
        return self._finish()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stops the loop after the epoch in progress, if any, and the listener; an epoch
        not yet committed is replayed on restart."""
        self.status = "stopping"
        self.loop.stop(timeout_s)
        self._end()
        self.status = "stopped"

    def _finish(self) -> str:
        self._end()
        self.error = self.loop.failure()
        self.status = "failed" if self.error is not None else "stopped"
        return self.status

    def _end(self) -> None:
        if self._listener is not None:
            self._listener.stop()
        self.deliveries.close()

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Waits until the acks and metrics of the epochs done so far are delivered."""
        return self.deliveries.flush(timeout_s)

    def failure(self) -> BaseException | None:
        """The error an epoch failed with, once the loop has ended on it."""
        return self.loop.failure()

    def progress(self) -> list[dict[str, Any]]:
        """Each recent epoch's progress (``batchId``, ``durationMs``), also after the run
        stopped."""
        return self.loop.progress()

    def parallelism(self) -> dict[str, int]:
        """Current parallelism of every operator."""
        with self._lock:
            return {op: c.parallelism for op, c in self.config.items()}
