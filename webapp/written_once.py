"""Answers built from rows that never change once written, kept per web process.

An epoch's metrics (a run's ``RunEpoch`` and its ``OperatorEpoch`` rows, stored once in one
transaction) and a job's versions (immutable documents) are what the API's hottest reads
repeat: ``GET /api/runs/{id}`` and ``GET /api/jobs/{id}``, asked many times a second by
dashboards and scripts. Each answer here is keyed by what identifies those rows for good (the
run or job with its creation time, so a reused id never matches, and the epoch or the latest
version number, read from the run or job row the request reads anyway), so a kept answer is
never stale: a new epoch or version is a new key. A miss costs the queries it replaces.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

KEPT = 512


class WrittenOnce:
    """A bounded map from a key to the answer ``build()`` made for it; the least recently
    used answer leaves first. Answers are shared: callers must not change them."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._answers: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._answers:
                self._answers.move_to_end(key)
                self.hits += 1
                return self._answers[key]
        answer = build()  # outside the lock: queries must not serialise the threads
        with self._lock:
            self.misses += 1
            self._answers[key] = answer
            self._answers.move_to_end(key)
            while len(self._answers) > self.kept:
                self._answers.popitem(last=False)
        return answer

    def clear(self) -> None:
        with self._lock:
            self._answers.clear()


epoch_answers = WrittenOnce()
version_answers = WrittenOnce()
