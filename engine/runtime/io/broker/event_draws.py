"""The generator's events computed outside Spark, for the producer: event ``i`` has the same
campaign, user, type and amount as ``source.generator``'s event ``i`` (the same Spark
xxhash64 draws). ``fields`` computes one event in plain Python (the reference); ``columns``
computes a whole batch with numpy, so a producer spends no Python work per draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from engine.mapping.xxhash64 import P1, P2, P3, P4, P5, SPARK_SEED, hash_int, hash_long, to_signed

USERS = 1_000_000
TYPE_CUTS = ((80, "view"), (95, "click"))  # the rest are purchases
_SALTS = (1, 2, 3, 4)


@dataclass(frozen=True)
class EventDraws:
    """The generator's random draws: keys, skew and seed as ``source.generator`` has them."""

    keys: int = 1000
    skew: float = 0.0
    seed: int = 0

    def _hashes(self, event_id: int) -> tuple[int, int, int, int]:
        """Spark's ``xxhash64(seed, event_id, salt)`` for salts 1..4 (one shared prefix)."""
        prefix = hash_long(event_id, hash_int(self.seed, SPARK_SEED))
        h1, h2, h3, h4 = (to_signed(hash_int(salt, prefix)) for salt in _SALTS)
        return h1, h2, h3, h4

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
        return {
            "event_id": str(event_id),
            "event_time": str(now_ms),
            "campaign_id": str(self._campaign(h1)),
            "user_id": str(h2 % USERS),
            "event_type": _kind_names()[h3 % 100],
            "amount": str((h4 % 100_000) / 100.0),
        }

    def columns(self, first: int, count: int) -> EventColumns:
        """The draws of events ``first .. first + count - 1`` as text, column by column:
        each value exactly as ``fields`` writes it."""
        ids = np.arange(first, first + count, dtype=np.int64).view(np.uint64)
        prefix = _hash_long(ids, hash_int(self.seed, SPARK_SEED))
        h1, h2, h3, h4 = (_hash_int_seeded(salt, prefix).view(np.int64) for salt in _SALTS)
        if self.skew <= 0:
            campaigns = (h1 % self.keys).tolist()
        else:  # float powers: the reference's own arithmetic, so no draw rounds otherwise
            campaigns = [self._campaign(h) for h in h1.tolist()]
        kinds, amounts = _kind_names(), _amount_texts()
        return EventColumns(
            event_id=[str(i) for i in range(first, first + count)],
            campaign_id=list(map(str, campaigns)),
            user_id=list(map(str, (h2 % USERS).tolist())),
            event_type=[kinds[b] for b in (h3 % 100).tolist()],
            amount=[amounts[a] for a in (h4 % 100_000).tolist()],
        )


@dataclass(frozen=True)
class EventColumns:
    """A batch of events' fields as text, one list per field (the event time is the
    batch's own, given when it is written)."""

    event_id: list[str]
    campaign_id: list[str]
    user_id: list[str]
    event_type: list[str]
    amount: list[str]


@cache
def _kind_names() -> tuple[str, ...]:
    return tuple(next((name for cut, name in TYPE_CUTS if b < cut), "purchase")
                 for b in range(100))


@cache
def _amount_texts() -> tuple[str, ...]:
    return tuple(str(cents / 100.0) for cents in range(100_000))


# xxhash64 over uint64 arrays: numpy's unsigned arithmetic wraps modulo 2**64 as the
# reference's masks do.
_U = np.uint64


def _rotl(values: np.ndarray, bits: int) -> np.ndarray:
    return (values << _U(bits)) | (values >> _U(64 - bits))


def _fmix(h: np.ndarray) -> np.ndarray:
    h = (h ^ (h >> _U(33))) * _U(P2)
    h = (h ^ (h >> _U(29))) * _U(P3)
    return h ^ (h >> _U(32))


def _hash_long(values: np.ndarray, seed: int) -> np.ndarray:
    """``hash_long`` of each value with one seed."""
    lane = _rotl(values * _U(P2), 31) * _U(P1)
    h = _U((seed + P5 + 8) & 0xFFFFFFFFFFFFFFFF) ^ lane
    return _fmix(_rotl(h, 27) * _U(P1) + _U(P4))


def _hash_int_seeded(value: int, seeds: np.ndarray) -> np.ndarray:
    """``hash_int`` of one value with each seed."""
    h = (seeds + _U(P5 + 4)) ^ _U(((value & 0xFFFFFFFF) * P1) & 0xFFFFFFFFFFFFFFFF)
    return _fmix(_rotl(h, 23) * _U(P2) + _U(P3))
