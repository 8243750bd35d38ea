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
) -> int:
    """Writes events ``first_id, first_id + 1, ...``: ``count`` of them as fast as the
    broker takes them, or ``rate`` per second until interrupted; with ``maxlen`` the
    stream is trimmed to about that many entries; ``stopping`` ends it between batches.
    Returns how many were written."""
    written = 0
    started = time.monotonic()
    for size in _batches(count, rate, started):
        if stopping():
            break
        if size == 0:
            continue
        now_ms = int(time.time() * 1000)
        with client.pipeline(transaction=False) as pipe:
            for event_id in range(first_id + written, first_id + written + size):
                fields = draws.fields(event_id, now_ms)
                pipe.xadd(stream, fields, maxlen=maxlen, approximate=True)  # type: ignore[arg-type]
            pipe.execute()
        written += size
        progress(written)
    return written


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
