"""The epoch loop of a run whose sources are all clock sources: the driver starts each
epoch itself, with no Spark streaming query around it.

Such a run plans every row it reads in its own epoch log (the clock sources' id ranges), so
a Spark query would only pace the epochs, at the price of its own two logs per epoch (offsets
and commits, each a file written through Hadoop) and a trigger loop polling the clock: ~35
ms of every epoch, measured as Spark's ``triggerExecution`` less its ``addBatch``. Here the
epoch log is the only log: an epoch whose plan is logged and whose outcome is not is run
again at the next start (with its logged plan, as after a Spark query's restart), one whose
outcome is logged is done.

Epochs start as the epoch clock starts them (``engine.runtime.io.epoch_clock``): on a grid
of intervals from the first, at once after one that ran past the next start, at once when a
command wakes the loop, and back to back without an interval. A stop never interrupts an
epoch: the loop ends before the next one.
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
from engine.runtime.driver.query import EpochGate

log = logging.getLogger("streamscale.run")

RECENT_PROGRESS = 100  # epochs kept in ``progress()``, as Spark keeps its query's


def first_epoch(log: EpochLog) -> int:
    """The epoch a run starts with: the last one logged if it has no outcome yet (it runs
    again), else the one after it; 0 for a new run."""
    latest = log.latest_plan(before=2**62)
    if latest is None:
        return 0
    epoch = latest[0]
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

    def close(self) -> None:
        """Every ``wait`` from now on returns False at once."""
        self._closed = True
        self._woken.set()


class EpochLoop:
    """Runs ``on_epoch(batch, epoch)`` for each epoch the ``gate`` admits, in a thread of
    the driver; the same surface as ``RunQuery``. ``batch`` is an empty frame of the clock's
    tick column: every source's rows come from the epoch's plan."""

    def __init__(self, spark: SparkSession, options: RunOptions, log: EpochLog,
                 on_epoch: Callable[[DataFrame, int], None]) -> None:
        self.spark, self.log, self._on_epoch = spark, log, on_epoch
        self.gate = EpochGate(options.stop_after_epoch)
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
            if not self.gate.admit(epoch):
                return
            started = time.time()
            try:
                assert self._batch is not None
                self._on_epoch(self._batch, epoch)
            except BaseException as error:  # noqa: BLE001  # the run's failure, kept
                # Its trace in the driver's output, as Spark logs a query's failure.
                log.error("epoch %s failed; the run ends", epoch, exc_info=error)
                self._error = error
                return
            finally:
                self.gate.leave()
            self._committed = epoch
            self._progress.append(_progress(epoch, started, time.time()))
            epoch += 1

    def running(self) -> bool:
        """Whether the loop runs."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout_s: float) -> None:
        """Ends the loop after the epoch in progress, if any (waits up to ``timeout_s``)."""
        self.gate.close()
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

    def ended(self) -> BaseException | None:
        """After the loop's end: its error, if an epoch failed."""
        return self.failure()

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
