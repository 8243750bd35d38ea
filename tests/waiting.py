"""Waiting on a condition in tests, never on a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], *, timeout: float, what: str,
             interval: float = 0.1) -> T:
    """``predicate()``'s first truthy value, polled every ``interval`` seconds;
    AssertionError naming ``what`` if none comes within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}")
        time.sleep(interval)
