"""The durable per-run control channel: commands in.

``RedisControlChannel`` keeps them in a Redis stream (``<prefix>run:<id>:control``);
``MemoryControlChannel`` is the same contract in memory for tests. Cursors are stream ids:
the driver logs the last one it applied with each epoch, so after a crash it re-reads
exactly the commands that had not taken effect. What became of a command goes to the run's
host (``ReconfigurationRecorder``), not back on the channel.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, cast

import redis


class ControlChannel(ABC):
    """Commands for one run, read in order after a cursor."""

    @abstractmethod
    def send(self, message: Mapping[str, str]) -> str:
        """Appends a command; returns its cursor (client side)."""

    @abstractmethod
    def read_after(self, cursor: str | None, block_ms: int) -> list[tuple[str, dict[str, str]]]:
        """Commands after ``cursor`` (all if None), waiting up to ``block_ms`` for one."""

    # Fencing: one driver per run. Each driver takes the next generation as it starts and
    # checks before each epoch that no later driver took one since (``JobRun``).
    @abstractmethod
    def take_generation(self) -> int:
        """The generation of a driver starting now: one more than any earlier driver's."""

    @abstractmethod
    def newest_generation(self) -> int | None:
        """The newest driver's generation; None when it cannot be read now."""


class MemoryControlChannel(ControlChannel):
    """In-memory channel for unit tests (one process)."""

    def __init__(self) -> None:
        self._messages: list[tuple[str, dict[str, str]]] = []
        self._changed = threading.Condition()
        self._generation = 0

    def send(self, message: Mapping[str, str]) -> str:
        """Appends with a sequential cursor."""
        with self._changed:
            cursor = f"{len(self._messages) + 1}-0"
            self._messages.append((cursor, dict(message)))
            self._changed.notify_all()
        return cursor

    def read_after(self, cursor: str | None, block_ms: int) -> list[tuple[str, dict[str, str]]]:
        """Messages after ``cursor``; waits on a condition when there are none."""
        start = 0 if cursor is None else int(cursor.split("-")[0])
        with self._changed:
            if len(self._messages) <= start and block_ms > 0:
                self._changed.wait(block_ms / 1000.0)
            return list(self._messages[start:])

    def take_generation(self) -> int:
        """The next generation of this process's drivers."""
        with self._changed:
            self._generation += 1
            return self._generation

    def newest_generation(self) -> int | None:
        """The newest generation taken."""
        return self._generation


class RedisControlChannel(ControlChannel):
    """Redis streams; ``prefix`` isolates deployments (and tests) sharing one server."""

    def __init__(
        self, url: str, run_id: str, prefix: str = "", client: redis.Redis | None = None
    ) -> None:
        # ``client``: a connection pool the caller keeps (decode_responses=True), shared by
        # many channels instead of one per channel.
        self._redis = client or redis.Redis.from_url(url, decode_responses=True)
        base = f"{prefix}run:{run_id}"
        self.control_key = f"{base}:control"
        self.generation_key = f"{base}:generation"

    def send(self, message: Mapping[str, str]) -> str:
        """XADD to the control stream."""
        return str(self._redis.xadd(self.control_key, cast(Any, dict(message))))

    def read_after(self, cursor: str | None, block_ms: int) -> list[tuple[str, dict[str, str]]]:
        """XREAD after ``cursor`` (from the start when None)."""
        reply: Any = self._redis.xread({self.control_key: cursor or "0-0"}, block=block_ms or None)
        if not reply:
            return []
        return [(str(entry_id), dict(fields)) for entry_id, fields in reply[0][1]]

    def take_generation(self) -> int:
        """INCR of the run's generation: kept in Redis, so it outlives every driver."""
        return int(cast(Any, self._redis.incr(self.generation_key)))

    def newest_generation(self) -> int | None:
        """The run's generation in Redis; None while Redis cannot be reached (the epoch
        then goes on: its commits are idempotent by epoch id, and failing it would spend a
        restart on a broker blip)."""
        try:
            value = self._redis.get(self.generation_key)
        except (redis.ConnectionError, redis.TimeoutError):
            return None
        return int(cast(Any, value)) if value is not None else 0

    def delete(self) -> None:
        """Removes this run's stream and generation (tests, benches)."""
        self._redis.delete(self.control_key, self.generation_key)


def open_control_channel(url: str | None, run_id: str, prefix: str = "") -> ControlChannel:
    """A Redis channel for a redis:// URL, else an in-memory one."""
    if url and url.startswith(("redis://", "rediss://", "unix://")):
        return RedisControlChannel(url, run_id, prefix)
    return MemoryControlChannel()
