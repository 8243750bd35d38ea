"""A private state Redis for the state store's tests (the durability benchmark's
``StateRedis``): started with a chosen fsync policy in a folder of its own, killed with SIGKILL
and started again on the same port and data, as a crash and a restart of the state's Redis
would do."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.state_durability import StateRedis

__all__ = ["StateRedis", "state_redis_fixture"]


@pytest.fixture(name="state_redis")
def state_redis_fixture(tmp_path: Path) -> Iterator[StateRedis]:
    """A state Redis that fsyncs every write, stopped after the test."""
    server = StateRedis(tmp_path / "state-redis").start()
    yield server
    server.stop()
