"""A producer for demos, tests and benchmarks: the generator's events into a Redis stream.

Event ``i`` has the same campaign, user, type and amount as the generator's event ``i``
(the same Spark xxhash64 draws, computed in Python); its event time is the wall clock when
it is written, as a real producer's would be. Entries are flat fields (``payload: fields``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import redis

from engine.mapping.xxhash64 import SPARK_SEED, hash_int, hash_long, to_signed

EVENT_SCHEMA = {"event_id": "long", "event_time": "timestamp", "campaign_id": "long",
                "user_id": "long", "event_type": "string", "amount": "double"}
_USERS = 1_000_000
_TYPE_CUTS = ((80, "view"), (95, "click"))
_BATCH = 500


@dataclass(frozen=True)
class EventDraws:
    """The generator's random draws: keys, skew and seed as ``source.generator`` has them."""

    keys: int = 1000
    skew: float = 0.0
    seed: int = 0

    def _hashes(self, event_id: int) -> tuple[int, int, int, int]:
        """Spark's ``xxhash64(seed, event_id, salt)`` for salts 1..4 (one shared prefix)."""
        prefix = hash_long(event_id, hash_int(self.seed, SPARK_SEED))
        h1, h2, h3, h4 = (to_signed(hash_int(salt, prefix)) for salt in (1, 2, 3, 4))
        return h1, h2, h3, h4

    def campaign(self, event_id: int) -> int:
        """``campaign_id`` of event ``event_id`` (uniform, or power law when skewed)."""
        return self._campaign(self._hashes(event_id)[0])

    def _campaign(self, h1: int) -> int:
        if self.skew <= 0:
            return h1 % self.keys
        u = (h1 % 2**53 + 0.5) / float(2**53)
        n1 = float(self.keys + 1)
        if abs(self.skew - 1.0) < 1e-9:
            x = n1**u
        else:
            e = 1.0 - self.skew
            x = (1.0 + u * (n1**e - 1.0)) ** (1.0 / e)
        return min(math.floor(x) - 1, self.keys - 1)

    def fields(self, event_id: int, now_ms: int) -> dict[str, str]:
        """The entry's fields for event ``event_id`` written at ``now_ms``."""
        h1, h2, h3, h4 = self._hashes(event_id)
        bucket = h3 % 100
        kind = next((name for cut, name in _TYPE_CUTS if bucket < cut), "purchase")
        return {
            "event_id": str(event_id),
            "event_time": str(now_ms),
            "campaign_id": str(self._campaign(h1)),
            "user_id": str(h2 % _USERS),
            "event_type": kind,
            "amount": str((h4 % 100_000) / 100.0),
        }


def next_id_key(stream: str) -> str:
    """The key of the counter that holds the stream's next event id: kept beside the stream
    so a restarted producer continues the ids, whatever the stream was trimmed to."""
    return f"{stream}:next-event-id"


def next_event_id(client: redis.Redis, stream: str) -> int:
    """The id the stream's next event takes: its counter, or for a stream written before the
    counter was kept, one past its newest entry's event id (0 for a new stream)."""
    kept = client.get(next_id_key(stream))
    if kept is not None:
        return int(kept)  # type: ignore[arg-type]
    newest: Any = client.xrevrange(stream, count=1)
    if not newest:
        return 0
    fields = newest[0][1]
    last = fields.get(b"event_id", fields.get("event_id"))
    return int(last) + 1 if last is not None else 0


# Waiting out a broker that went away (a restart): 0.5 s doubling to 10 s between tries.
RETRY_FIRST_S, RETRY_MAX_S = 0.5, 10.0


def produce(
    client: redis.Redis,
    stream: str,
    draws: EventDraws,
    first_id: int,
    count: int | None,
    rate: float | None,
    progress: Callable[[int], None] = lambda written: None,
    maxlen: int | None = None,
    stopping: Callable[[], bool] = lambda: False,
    waiting: Callable[[Exception, float], None] = lambda error, delay_s: None,
) -> int:
    """Writes events ``first_id, first_id + 1, ...``: ``count`` of them as fast as the
    broker takes them, or ``rate`` per second until interrupted; with ``maxlen`` the
    stream is trimmed to about that many entries; ``stopping`` ends it between batches.
    Each batch and the stream's id counter (``next_id_key``) advance in one transaction, so a
    later producer continues where this one ended. A broker that cannot be reached is
    waited for (``waiting`` is told each failure and the wait before the next try), and
    the batch is written again from the counter the broker kept, so no id is written twice.
    Returns how many were written."""
    client.set(next_id_key(stream), first_id)
    written = 0
    started = time.monotonic()
    for size in _batches(count, rate, started):
        if stopping():
            break
        if size == 0:
            continue
        if not _write_batch(client, stream, draws, size, maxlen, stopping, waiting):
            break
        written += size
        progress(written)
    return written


def _write_batch(client: redis.Redis, stream: str, draws: EventDraws, size: int,
                 maxlen: int | None, stopping: Callable[[], bool],
                 waiting: Callable[[Exception, float], None]) -> bool:
    """Writes one batch of ``size`` events after the stream's counter, retrying while the
    broker is unreachable; False if ``stopping`` ended the wait first."""
    delay_s = RETRY_FIRST_S
    while True:
        try:
            # Read each time: a reply lost to a dropped connection may hide a batch that
            # was written; the counter, written with it, says so.
            first = next_event_id(client, stream)
            now_ms = int(time.time() * 1000)
            with client.pipeline(transaction=True) as pipe:
                for event_id in range(first, first + size):
                    pipe.xadd(stream, draws.fields(event_id, now_ms),  # type: ignore[arg-type]
                              maxlen=maxlen, approximate=True)
                pipe.incrby(next_id_key(stream), size)
                pipe.execute()
            return True
        except (redis.ConnectionError, redis.TimeoutError) as error:
            waiting(error, delay_s)
            if _stopped_within(delay_s, stopping):
                return False
            delay_s = min(RETRY_MAX_S, delay_s * 2)


def _stopped_within(seconds: float, stopping: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if stopping():
            return True
        time.sleep(min(0.1, seconds))
    return stopping()


def _batches(count: int | None, rate: float | None, started: float) -> Iterator[int]:
    """Batch sizes: all of ``count`` in batches, or what ``rate`` has made due so far."""
    if count is not None:
        for done in range(0, count, _BATCH):
            yield min(_BATCH, count - done)
        return
    assert rate is not None
    written = 0
    while True:
        due = int((time.monotonic() - started) * rate) - written
        size = min(due, _BATCH)
        if size > 0:
            written += size
        else:
            time.sleep(min(0.05, 1.0 / rate))
        yield max(size, 0)  # 0: a chance to stop between batches
