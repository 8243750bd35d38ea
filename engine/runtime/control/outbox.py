"""Deliveries to the run's host (acknowledgements, epoch metrics) off the epoch's path.

An epoch only queues what it has to say; one background thread delivers the items in order
and retries a failed one with back-off, so a database or channel hiccup delays the dashboard
but never slows or fails an epoch. An item still failing after ``give_up_s`` is dropped and
logged with what it was.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.ports import MetricsPublisher, ReconfigurationRecorder
from engine.runtime.control.messages import Ack

log = logging.getLogger("streamscale.outbox")


@dataclass(frozen=True)
class Delivery:
    """One call to make: ``send()``; ``what`` names it in the logs."""

    what: str
    send: Callable[[], object]


class Outbox:
    """An ordered queue of deliveries with one sender thread."""

    def __init__(
        self, first_retry_s: float = 0.05, max_retry_s: float = 2.0, give_up_s: float = 300.0
    ) -> None:
        self._queue: queue.Queue[Delivery | None] = queue.Queue()
        self._first_retry_s = first_retry_s
        self._max_retry_s = max_retry_s
        self._give_up_s = give_up_s
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="host-outbox", daemon=True)
        self._thread.start()
        self.failures = 0
        self.dropped: list[str] = []

    def put(self, what: str, send: Callable[[], object]) -> None:
        """Queues a delivery; returns at once."""
        self._queue.put(Delivery(what, send))

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Waits until everything queued so far is delivered (or dropped); False on timeout.
        Once closed, at once: ``close`` delivered what was queued before it."""
        done = threading.Event()
        self.put("flush marker", done.set)
        deadline = time.monotonic() + timeout_s
        while not done.wait(0.05):
            if not self._thread.is_alive():
                return True
            if time.monotonic() > deadline:
                return False
        return True

    def close(self, timeout_s: float = 30.0) -> None:
        """Delivers what is queued (retrying for at most ``timeout_s``), then stops."""
        deadline = time.monotonic() + timeout_s
        self._queue.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._stopping.set()  # retries give up at once from now on
            self._thread.join(max(0.0, deadline - time.monotonic()) + 1.0)

    def _loop(self) -> None:
        for item in iter(self._queue.get, None):  # None: closed
            self._deliver(item)

    def _deliver(self, item: Delivery) -> None:
        started, wait = time.monotonic(), self._first_retry_s
        while True:
            try:
                item.send()
                return
            except Exception as error:  # noqa: BLE001 - any failure is retried, none escapes
                self.failures += 1
                if self._stopping.is_set() or time.monotonic() - started > self._give_up_s:
                    log.error("dropped %s after %d s of failures: %s", item.what,
                              round(time.monotonic() - started), error)
                    self.dropped.append(item.what)
                    return
                log.warning("could not deliver %s (%s); retrying in %.2f s", item.what, error,
                            wait)
                self._stopping.wait(wait)
                wait = min(wait * 2, self._max_retry_s)


class RunDeliveries:
    """What a run tells its host, off its epochs' path: acks to its recorder and epoch
    metrics to its publisher, in order."""

    def __init__(
        self,
        run_id: str,
        publisher: MetricsPublisher,
        recorder: ReconfigurationRecorder | None,
    ) -> None:
        self.run_id = run_id
        self._publisher, self._recorder = publisher, recorder
        self.to_host = Outbox()

    def acks(self, acks: Sequence[Ack], ended_at_ms: float | None) -> None:
        """Queues acks; applied ones carry when their epoch ended (``ended_at_ms``)."""
        if self._recorder is None:
            return
        for ack in (a.ended(ended_at_ms) for a in acks):
            self.to_host.put(f"the ack of {ack.request_id!r}",
                             functools.partial(self._recorder.acknowledge, self.run_id, ack))

    def metrics(self, epoch: int, build: Callable[[], dict[str, Any]]) -> None:
        """Queues an epoch's metrics for the publisher, built by ``build`` on the deliveries'
        thread (once; a build that fails is logged and dropped, not retried like a failed
        delivery)."""
        what = f"the metrics of epoch {epoch}"

        @functools.cache
        def built() -> dict[str, Any] | None:
            try:
                return build()
            except Exception:  # a bug in the figures must not stop the deliveries
                log.exception("could not build %s; dropped", what)
                return None

        def send() -> None:
            payload = built()
            if payload is not None:
                self._publisher.publish_epoch(self.run_id, payload)

        self.to_host.put(what, send)

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Waits until everything queued so far is delivered; False on timeout."""
        return self.to_host.flush(timeout_s)

    def close(self) -> None:
        """Delivers what is queued (retrying for a bounded time), then stops."""
        self.to_host.close()
