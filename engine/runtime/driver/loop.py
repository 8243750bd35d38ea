"""The epoch loop of a run: the driver starts each epoch itself, with no Spark streaming
query around it.

A run plans everything it reads in its own epoch log (a clock source's id range, a
directory's files, a broker's offsets), so the epoch log is the only log: an epoch whose plan
is logged and whose outcome is not is run again at the next start (with its logged plan), one
whose outcome is logged is done.

Epochs start on a grid of intervals from the first, at once after one that ran past the next
start, at once when a command wakes the loop, and back to back without an interval. An epoch
that would take nothing (an idle run) is not run: the loop looks again at the next interval.
A stop never interrupts an epoch: the loop ends before the next one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from engine.runtime.driver.epoch_log import EpochLog
from engine.runtime.driver.options import RunOptions

log = logging.getLogger("streamscale.run")

RECENT_PROGRESS = 100  # epochs kept in ``progress()``, as Spark keeps its query's
IDLE_POLL_S = 0.1  # how soon a run whose epochs go back to back looks again for data


def first_epoch(log: EpochLog) -> int:
    """The epoch a run starts with: the last one logged if it has no outcome yet (it runs
    again), else the one after it; 0 for a new run."""
    latest = log.latest_plan(before=2**62)
    if latest is None:
        return 0
    epoch = latest.epoch
    return epoch if log.outcome(epoch) is None else epoch + 1


class EpochPacer:
    """When epochs start: every ``interval_ms`` on a grid from the first one's start (one
    that ran past the next start is followed at once, the one after that is on the grid
    again), at once after ``wake``, back to back without an interval."""

    def __init__(self, interval_ms: int) -> None:
        self._interval_s = interval_ms / 1000.0
        self._woken = threading.Event()
        self._closed = False
        self._anchor: float | None = None  # monotonic start of the first epoch
        self._due: float | None = None  # monotonic time the next epoch is due; None: now

    def wait(self) -> bool:
        """Blocks until the next epoch is due or woken; False once closed."""
        if self._interval_s > 0 and self._due is not None:
            self._woken.wait(max(0.0, self._due - time.monotonic()))
        self._woken.clear()
        if self._closed:
            return False
        now = time.monotonic()
        if self._interval_s > 0 and (self._due is None or now >= self._due):
            self._anchor = now if self._anchor is None else self._anchor
            self._due = now + self._interval_s - (now - self._anchor) % self._interval_s
        return True

    def wake(self) -> None:
        """The next ``wait`` returns at once (a command arrived)."""
        self._woken.set()

    def rest(self, seconds: float) -> None:
        """Back to back, waits ``seconds`` or until woken (an idle run looks again for data
        after that); on a grid, the next ``wait`` waits for its start anyway."""
        if self._interval_s <= 0:
            self._woken.wait(seconds)

    def close(self) -> None:
        """Every ``wait`` from now on returns False at once."""
        self._closed = True
        self._woken.set()


class EpochLoop:
    """Runs ``on_epoch(batch, epoch)`` for each epoch until the run stops, in a thread of
    the driver; ``on_epoch`` says whether it ran one (an idle run's does not). ``batch`` is
    an empty frame: every source's rows come from the epoch's plan. A stop never interrupts
    an epoch in progress: an epoch that would start once the stop is asked for (or after
    ``stop_after``) is refused."""

    def __init__(self, spark: SparkSession, options: RunOptions, log: EpochLog,
                 on_epoch: Callable[[DataFrame, int], bool]) -> None:
        self.spark, self.log, self._on_epoch = spark, log, on_epoch
        self.stop_after = options.stop_after_epoch
        self._stopping = False
        self._pacer = EpochPacer(options.interval_ms)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._committed: int | None = None
        self._progress: deque[dict[str, Any]] = deque(maxlen=RECENT_PROGRESS)
        self._batch: DataFrame | None = None

    def start(self) -> None:
        """Starts the loop from the run's epoch log."""
        self._batch = self.spark.range(0).withColumnRenamed("id", "__tick")
        epoch = first_epoch(self.log)
        self._thread = threading.Thread(target=self._run, args=(epoch,), name="epoch-loop",
                                        daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Starts the next epoch as soon as the one running (if any) ends."""
        self._pacer.wake()

    def _run(self, epoch: int) -> None:
        while self._pacer.wait():
            if self._stopping or (self.stop_after is not None and epoch > self.stop_after):
                return
            started = time.time()
            try:
                assert self._batch is not None
                ran = self._on_epoch(self._batch, epoch)
            except BaseException as error:  # noqa: BLE001  # the run's failure, kept
                # Its trace in the driver's output, as Spark logs a query's failure.
                log.error("epoch %s failed; the run ends", epoch, exc_info=error)
                self._error = error
                return
            if not ran:
                self._pacer.rest(IDLE_POLL_S)
                continue
            self._committed = epoch
            self._progress.append(_progress(epoch, started, time.time()))
            epoch += 1

    def running(self) -> bool:
        """Whether the loop runs."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout_s: float) -> None:
        """Ends the loop after the epoch in progress, if any (waits up to ``timeout_s``)."""
        self._stopping = True
        self._pacer.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def await_commit(self, epoch: int, timeout_s: float = 30.0) -> None:
        """Waits until ``epoch`` is done (or the loop ended)."""
        deadline = time.monotonic() + timeout_s
        while self.running() and time.monotonic() < deadline:
            if self._committed is not None and self._committed >= epoch:
                return
            time.sleep(0.01)

    def failure(self) -> BaseException | None:
        """The error an epoch failed with, once the loop has ended on it."""
        return None if self.running() else self._error

    def progress(self) -> list[dict[str, Any]]:
        """Each recent epoch as Spark reports a micro-batch: ``batchId``, ``timestamp`` and
        ``durationMs`` (``triggerExecution``: the whole epoch, from its start to its
        outcome logged and its metrics and acks queued)."""
        return list(self._progress)


def _progress(epoch: int, started: float, ended: float) -> dict[str, Any]:
    took = int(round((ended - started) * 1000.0))
    stamp = datetime.fromtimestamp(started, tz=UTC)
    return {
        "batchId": epoch,
        "timestamp": stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z",
        "durationMs": {"triggerExecution": took, "addBatch": took},
    }
