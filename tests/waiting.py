"""Waiting on a condition in tests, never on a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], *, timeout_s: float, what: str,
               interval_s: float = 0.05) -> T:
    """``predicate()``'s first truthy value, polled every ``interval_s``; AssertionError
    naming ``what`` if none comes within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout_s:g} s for {what}")
        time.sleep(interval_s)
