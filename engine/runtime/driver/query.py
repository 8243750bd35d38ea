"""The Spark streaming query of a run that reads sources through Spark: started with one
callback per micro-batch, restarted when a Python worker did not start in time, stopped only
between epochs. (A run whose sources are all clock sources runs from ``loop`` instead.)"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from engine.dag import JobGraph
from engine.runtime.driver.options import RunOptions
from engine.runtime.io.streams import job_stream
from engine.runtime.spark.session import streaming_error_logs

STOP_MARK = "streamscale-stop-requested"
WORKER_START_TIMEOUT = "Python worker failed to connect back"
WORKER_START_RETRIES = 3


class StopRequested(Exception):  # noqa: N818  # a signal, not an error
    """Raised inside an epoch that must not run because the run is stopping."""


def _not_a_stop(record: logging.LogRecord) -> bool:
    # py4j logs every exception raised in a Python callback; an epoch refused by a stop is none.
    return not (record.exc_info and isinstance(record.exc_info[1], StopRequested))


logging.getLogger("py4j.clientserver").addFilter(_not_a_stop)


class EpochGate:
    """Admits epochs until the run stops. A stop never interrupts an epoch in progress: an
    epoch that starts once the stop is asked for (or after ``stop_after``) is refused, not
    committed, replayed at the next start, and remembered, so the query's end tells a stop
    from a failure by state, not by message text."""

    def __init__(self, stop_after: int | None) -> None:
        self.stop_after = stop_after
        self.stopping = self.in_epoch = False
        self.refused_epoch: int | None = None
        self._lock = threading.Lock()

    def admit(self, epoch: int) -> bool:
        """Whether ``epoch`` may run; if so, it is in progress until ``leave``."""
        with self._lock:
            refuse = self.stopping or (self.stop_after is not None and epoch > self.stop_after)
            if refuse:
                self.refused_epoch = epoch
            self.in_epoch = not refuse
        return not refuse

    def leave(self) -> None:
        """The admitted epoch has ended."""
        self.in_epoch = False

    def close(self) -> None:
        """Refuses every epoch from now on."""
        with self._lock:
            self.stopping = True


class RunQuery:
    """Runs ``on_epoch(batch, epoch)`` for each micro-batch of the graph's stream, for the
    epochs its ``gate`` admits."""

    def __init__(self, spark: SparkSession, graph: JobGraph, options: RunOptions, run_id: str,
                 on_epoch: Callable[[DataFrame, int], None]) -> None:
        self.spark, self.graph, self.options = spark, graph, options
        self._name = f"streamscale_{run_id}".replace("-", "_")
        self._on_epoch = on_epoch
        self.gate = EpochGate(options.stop_after_epoch)
        self._query: StreamingQuery | None = None
        self._worker_retries = 0

    def start(self) -> None:
        """Starts the query from the run's checkpoint."""
        self._query = _open_query(self.spark, self.graph, self.options, self._name,
                                  self._on_batch)

    def wake(self) -> None:
        """Nothing: Spark's trigger paces the sources it reads, and a command waits for the
        next epoch it starts."""

    def _on_batch(self, batch: DataFrame, epoch: int) -> None:
        if not self.gate.admit(epoch):
            # Spark logs the refusal as a query error with a trace: not one for the user.
            streaming_error_logs(self.spark, enabled=False)
            raise StopRequested(STOP_MARK)
        try:
            self._on_epoch(batch, epoch)
        finally:
            self.gate.leave()

    def running(self) -> bool:
        """Whether the query runs (restarted first if a worker's start timed out)."""
        return self._query is not None and (self._query.isActive or self.restarted())

    def restarted(self) -> bool:
        """Restarts the query from its checkpoint (exactly once, like any restart) if it
        failed only because a Python worker (a Python data source's planner) did not
        connect back within Spark's fixed 10 s: a machine too busy to start Python in
        time. At most ``WORKER_START_RETRIES`` times per run."""
        error = self._query.exception() if self._query is not None else None
        if error is None or WORKER_START_TIMEOUT not in str(error):
            return False
        if self._worker_retries >= WORKER_START_RETRIES or self.gate.stopping:
            return False
        self._worker_retries += 1
        self.start()
        return True

    def stop(self, timeout_s: float) -> None:
        """Stops the query after the epoch in progress, if any.

        Interrupting an epoch mid-way makes Spark match the Python callback's long error
        text against a regex that overflows the JVM's stack; stopping between epochs keeps
        the end clean and the query's exception meaningful."""
        self.gate.close()
        deadline = time.monotonic() + timeout_s
        while self._query is not None and self._query.isActive:
            if not self.gate.in_epoch or time.monotonic() > deadline:
                self._query.stop()
                break
            time.sleep(0.02)

    def await_commit(self, epoch: int, timeout_s: float = 30.0) -> None:
        """Waits until Spark has committed ``epoch`` (or the query ended)."""
        deadline = time.monotonic() + timeout_s
        while self._query is not None and self._query.isActive and time.monotonic() < deadline:
            progress = self._query.lastProgress
            if progress is not None and progress["batchId"] >= epoch:
                return
            time.sleep(0.05)

    def ended(self) -> BaseException | None:
        """After the query's end: its error, if it was one (not a refused epoch)."""
        if self.gate.refused_epoch is not None:
            streaming_error_logs(self.spark, enabled=True)
        return self.failure()

    def failure(self) -> BaseException | None:
        """The query's error if it ended on one: not a stop, which ends the query without
        an error (``stop``) or by an epoch this run refused, and not a worker-start time-out
        the run recovered from by restarting the query."""
        if self.restarted() or self._query is None or self._query.isActive:
            return None
        error = self._query.exception()
        return None if error is None or self.gate.refused_epoch is not None else error

    def progress(self) -> list[dict[str, Any]]:
        """Spark's progress report of each recent micro-batch, also after the query ended."""
        return [] if self._query is None else list(self._query.recentProgress)


def _open_query(spark: SparkSession, graph: JobGraph, options: RunOptions, name: str,
                on_batch: Callable[[DataFrame, int], None]) -> StreamingQuery:
    return (
        job_stream(spark, graph).writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", os.path.join(options.checkpoint, "spark"))
        .trigger(processingTime=f"{options.interval_ms} milliseconds")
        .queryName(name)
        .start()
    )
