"""Picks up control commands the moment they arrive, between and during epochs.

A background thread blocks on the channel; each message is parsed and stamped with its
pick-up time at once (that is the control latency), then waits for the next epoch
boundary, where the driver validates and installs it.

The thread survives anything a message or the channel does: a message that cannot be parsed
is rejected (its ack queued) and one that cannot even be rejected is dropped with a log line
naming it; a failing read is retried. A stop sent later is still picked up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from engine.runtime.control.channel import ControlChannel
from engine.runtime.control.messages import Ack, Command
from engine.runtime.errors import CommandRejected

log = logging.getLogger("streamscale.control")


class ControlListener:
    """Reads ``channel`` after ``cursor`` into a pending list until stopped; ``on_command``
    is told of each command taken (the driver starts the next epoch as soon as it can)."""

    def __init__(
        self,
        channel: ControlChannel,
        cursor: str | None,
        on_malformed: Callable[[Ack], None],
        block_ms: int = 100,
        on_command: Callable[[Command], None] | None = None,
    ) -> None:
        self._channel = channel
        self._cursor = cursor
        self._on_malformed = on_malformed
        self._on_command = on_command
        self._block_ms = block_ms
        self._pending: list[Command] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="control-listener", daemon=True)
        self.error: BaseException | None = None
        self.dropped: list[str] = []

    def start(self) -> None:
        """Starts the background reader."""
        self._thread.start()

    def stop(self) -> None:
        """Stops reading (returns after the current blocking read ends)."""
        self._stopped.set()
        self._thread.join(timeout=5)

    def drain(self) -> list[Command]:
        """The commands picked up so far, in order, removed from the pending list."""
        with self._lock:
            pending, self._pending = self._pending, []
        return pending

    def pending(self) -> bool:
        """Whether a command was picked up that no epoch's plan has taken yet."""
        with self._lock:
            return bool(self._pending)

    def _loop(self) -> None:
        while not self._stopped.is_set():
            try:
                messages = self._channel.read_after(self._cursor, self._block_ms)
            except Exception as exc:  # noqa: BLE001  # the run must survive a flaky channel
                if self.error is None or str(self.error) != str(exc):
                    log.warning("could not read the control channel (retrying): %s", exc)
                self.error = exc
                self._stopped.wait(0.5)
                continue
            self.error = None
            for cursor, fields in messages:
                try:
                    self._take(cursor, fields)
                except Exception as exc:  # noqa: BLE001  # one message must not end the listener
                    log.error("dropped control message %s %r: %s", cursor, fields, exc)
                    self.dropped.append(cursor)
                self._cursor = cursor

    def _take(self, cursor: str, fields: dict[str, str]) -> None:
        picked_up = time.time() * 1000.0
        try:
            command = Command.picked_up(fields, cursor, picked_up)
        except CommandRejected as exc:
            log.warning("rejected control message %s %r: %s", cursor, fields, exc)
            self._on_malformed(Ack.malformed(fields, cursor=cursor, reason=str(exc),
                                             picked_up_at_ms=picked_up))
            return
        with self._lock:
            self._pending.append(command)
        if self._on_command is not None:
            try:
                self._on_command(command)
            except Exception as exc:  # noqa: BLE001  # the command waits for the next epoch
                log.warning("could not start an epoch for control message %s: %s", cursor, exc)
