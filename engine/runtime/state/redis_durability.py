"""Whether the state's Redis keeps a write through a crash before the epoch commits.

Spark commits an epoch once its tasks return; a state write Redis acknowledged but had not yet
written to disk would be lost by a Redis crash, and the committed epoch would not be replayed:
the results would be silently wrong. So the state's Redis must either fsync its append-only
file on every write (``appendonly yes`` + ``appendfsync always``: a Redis of its own, so the
broker and the channel layer do not pay for it) or offer ``WAITAOF`` (Redis 7.2+), which the
store then calls after each batch of writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from engine.runtime.errors import StreamRuntimeError

FSYNC_ALWAYS = "fsync-always"
WAITAOF = "waitaof"
NOT_DURABLE = "none"
WAITAOF_TIMEOUT_MS = 10_000


class StateNotDurable(StreamRuntimeError):
    """The state Redis would lose acknowledged writes in a crash; the message says how to fix it."""


@dataclass(frozen=True)
class Durability:
    """How writes become durable on one server: ``mode`` and what was found."""

    mode: str
    found: str


def durability_of(client: redis.Redis) -> Durability:
    """Asks the server how it persists writes (CONFIG GET, else INFO for its version)."""
    try:
        config: Any = client.config_get("append*")
    except redis.ResponseError:  # CONFIG disabled (managed servers): the version decides
        config = {}
    appendonly = _text(config.get("appendonly"))
    fsync = _text(config.get("appendfsync"))
    found = f"appendonly={appendonly or '?'}, appendfsync={fsync or '?'}"
    if appendonly == "yes" and fsync == "always":
        return Durability(FSYNC_ALWAYS, found)
    info: Any = client.info("server")
    version = str(info.get("redis_version", "0"))
    found += f", version {version}"
    if _at_least(version, (7, 2)) and appendonly != "no":
        return Durability(WAITAOF, found)
    return Durability(NOT_DURABLE, found)


def require_durable(url: str) -> Durability:
    """The durability of the Redis at ``url``; StateNotDurable if it has none."""
    client = redis.Redis.from_url(url, socket_connect_timeout=10)
    with client:
        durability = durability_of(client)
    if durability.mode == NOT_DURABLE:
        raise StateNotDurable(
            f"the state Redis at {url} would lose writes of committed epochs in a crash "
            f"({durability.found}): give the state a Redis of its own with 'appendonly yes' and "
            "'appendfsync always', or use Redis 7.2+ with the append-only file on (WAITAOF)"
        )
    return durability


def wait_durable(client: redis.Redis, durability: Durability) -> None:
    """Returns once this connection's writes are on the server's disk."""
    if durability.mode != WAITAOF:
        return  # fsync-always: on disk before the reply; none: refused at start
    local, _ = client.execute_command("WAITAOF", 1, 0, WAITAOF_TIMEOUT_MS)
    if int(local) < 1:
        raise StateNotDurable(f"WAITAOF: the state Redis did not fsync within "
                              f"{WAITAOF_TIMEOUT_MS} ms")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


def _at_least(version: str, wanted: tuple[int, int]) -> bool:
    try:
        parts = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        return False
    return parts >= wanted
