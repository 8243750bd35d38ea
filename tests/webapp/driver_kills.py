"""Killing a private stack's run drivers and watching, through the API, how the run recovers:
shared by the kill tests and ``bench recovery``."""

from __future__ import annotations

import os
import signal
import time
from datetime import datetime

import psutil

from tests.webapp.private_stack import ApiClient, PrivateStack, wait_for


def driver_pid(stack: PrivateStack, run_id: int) -> int | None:
    """The pid of the stack's driver of the run, as the run records it, if that process is
    alive (a warm standby that took the run over has no run id on its command line)."""
    [(pid,)] = stack.query("SELECT driver_pid FROM jobs_run WHERE id = %s", (run_id,))
    if not pid:
        return None
    try:
        process = psutil.Process(pid)
        alive = process.status() != psutil.STATUS_ZOMBIE
        ours = process.environ().get("STREAMSCALE_VAR_DIR") == str(stack.var_dir)
    except psutil.Error:
        return None
    return pid if alive and ours else None


def standbys_ready(stack: PrivateStack) -> dict[str, int]:
    """Token -> pid of the stack's warm standbys that are up, free, and waiting for a run."""
    ready = {}
    for folder in (stack.var_dir / "standby").glob("*"):
        log = folder / "driver.log"
        if (folder / "free").exists() and log.exists() and "waiting for a run" in log.read_text(
                errors="replace"):
            ready[folder.name] = int((folder / "pid").read_text())
    return ready


def driver_jvm(pid: int) -> bool:
    """Whether the driver ``pid`` has started its Spark JVM."""
    try:
        return any(child.name() == "java" for child in psutil.Process(pid).children())
    except psutil.Error:
        return False


def driver_kill(stack: PrivateStack, run_id: int, *, timeout: float = 300.0) -> float:
    """SIGKILL to the stack's driver of the run alone (what it started, its JVM and Python
    workers, is left to the product to end); returns when, in epoch seconds."""
    pid = wait_for(lambda: driver_pid(stack, run_id), timeout=timeout,
                   what="a driver to kill", interval=0.05)
    os.kill(pid, signal.SIGKILL)
    return time.time()


def successor_epoch(api: ApiClient, run_id: int, *, restarts: int, killed_at: float,
                    timeout: float = 300.0) -> dict:
    """The first epoch a successor of the driver killed at ``killed_at`` finished: recorded
    once the run counts more than ``restarts`` restarts (the watcher has found the driver
    dead and restarted it; an epoch the killed driver finished may be recorded after the
    kill, since its metrics leave through a queue)."""
    restarted_at: list[float] = []

    def found() -> dict | None:
        run = api.get(f"/api/runs/{run_id}")
        if not restarted_at:
            if run["restarts"] <= restarts:
                return None
            restarted_at.append(time.time())
        # A successor finishes no epoch within a poll of its start being recorded.
        epochs = epochs_after(api, run_id, -1, max(killed_at, restarted_at[0]))
        return epochs[0] if epochs else None

    return wait_for(found, timeout=timeout, what="an epoch of the killed driver's successor",
                    interval=0.1)


def epochs_after(api: ApiClient, run_id: int, epoch: int, moment: float) -> list[dict]:
    """The run's epochs after ``epoch`` whose metrics were recorded after ``moment`` (epoch
    seconds), first recorded first."""
    epochs = api.get(f"/api/runs/{run_id}/metrics?since_epoch={epoch + 1}")["epochs"]
    return sorted((e for e in epochs if recorded_at(e) > moment), key=recorded_at)


def recorded_at(epoch: dict) -> float:
    """When the product recorded an epoch's metrics, in epoch seconds."""
    return datetime.fromisoformat(epoch["at"]).timestamp()


def restarts_not_on_a_kill(api: ApiClient, job_id: int) -> list[str]:
    """The reasons of the job's recorded restarts that were not the kill of a driver (a
    successor that met a driver still alive, say)."""
    entries = api.get(f"/api/jobs/{job_id}/history?page_size=500")["entries"]
    return [e["reason"] for e in entries
            if e["action"] == "run.recovering" and "was killed by SIGKILL" not in e["reason"]]
