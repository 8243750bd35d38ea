"""A job run as the engine's command line (`python -m engine run`) in a process of its own:
the command, its environment, its printed epochs and acks, and the run's start time from
its checkpoint. For the tests that kill or restart what a run depends on."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from engine.runtime.control.messages import Ack
from engine.runtime.spark.session import project_root


def engine_run_command(
    dag: Path,
    checkpoint: Path,
    last_epoch: int,
    *options: str,
    epoch_ms: int | None = 1000,
) -> list[str]:
    """`python -m engine run DAG` stopping after ``last_epoch``, epochs ``epoch_ms`` apart
    (None: as fast as the source allows), with no pause between triggers; ``options`` are
    further flags (``--run-id``, ``--master``, ``--state``, ``--control``...)."""
    pacing = [] if epoch_ms is None else ["--epoch-ms", str(epoch_ms)]
    return [sys.executable, "-m", "engine", "run", str(dag), "--checkpoint", str(checkpoint),
            *options, *pacing, "--trigger-ms", "0", "--stop-after-epoch", str(last_epoch)]


def engine_env(data_dir: Path, *, cluster: bool = False) -> dict[str, str]:
    """The environment of a run whose files sinks write under ``data_dir`` (where the Redis
    store caches runs too); ``cluster``: one that talks to a loopback standalone cluster."""
    env = {**os.environ, "PYTHONPATH": project_root(), "STREAMSCALE_DATA_DIR": str(data_dir),
           "STREAMSCALE_RUNS_CACHE": str(data_dir / "runs-cache")}
    if cluster:
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def printed_lines(proc: subprocess.Popen) -> queue.Queue:
    """The lines ``proc`` prints, read off its stdout by a thread as they come."""
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def epoch_printed(line: str) -> int | None:
    """The epoch a run's `epoch=N ...` line reports; None for other lines."""
    if not line.startswith("epoch="):
        return None
    return int(line.split()[0].split("=")[1])


def wait_for_epoch_line(
    lines: queue.Queue, proc: subprocess.Popen, timeout_s: float, epoch: int = 0
) -> bool:
    """Whether ``proc`` prints an epoch at or past ``epoch`` within ``timeout_s`` (False once
    it has exited)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            seen = epoch_printed(lines.get(timeout=0.2))
        except queue.Empty:
            continue
        if seen is not None and seen >= epoch:
            return True
    return False


def printed_acks(lines: Iterable[str]) -> list[Ack]:
    """The acks among a run's printed lines (``ack {json}``), in order."""
    return [Ack.from_dict(json.loads(line[4:])) for line in lines if line.startswith("ack ")]


def wait_for_printed_ack(lines: queue.Queue, proc: subprocess.Popen, request_id: str,
                         timeout_s: float, seen: list[str]) -> Ack | None:
    """The ack of ``request_id`` once ``proc`` prints it (None after ``timeout_s`` or once it
    has exited); every line read meanwhile is added to ``seen``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            seen.append(lines.get(timeout=0.2))
        except queue.Empty:
            continue
        found = [a for a in printed_acks(seen[-1:]) if a.request_id == request_id]
        if found:
            return found[0]
    return None


def run_start_ms(checkpoint: Path) -> int:
    """The event time (ms) a run's generator started at, as its checkpoint keeps it."""
    return int(json.loads((checkpoint / "run.json").read_text())["start_ms"])
