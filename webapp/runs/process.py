"""Driver processes: started detached from the Celery worker that launches them, and checked
for life without trusting a pid that may have been reused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

DRIVER_MODULE = "webapp.runs.driver"

# A short-lived middle process starts the driver in its own session and exits at once, so the
# driver is re-parented away from the worker (no zombie left behind, and it survives the task).
_SPAWN = (
    "import subprocess, sys\n"
    "log = open(sys.argv[1], 'ab')\n"
    "p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log,"
    " stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)\n"
    "print(p.pid, flush=True)\n"
)


def driver_spawn(*, run_id: int, log_path: Path, cwd: Path, env: dict[str, str]) -> int:
    """Start the driver process of a run and return its pid."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", DRIVER_MODULE, str(run_id)]
    middle = subprocess.run(
        [sys.executable, "-c", _SPAWN, str(log_path), *argv],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=True,
    )
    return int(middle.stdout.strip())


def driver_alive(pid: int | None, run_id: int) -> bool:
    """Whether `pid` is this run's driver and still running (not a zombie, not a reused pid)."""
    if not pid:
        return False
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        cmdline = process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    return DRIVER_MODULE in cmdline and str(run_id) in cmdline


def driver_signal(
    pid: int | None, run_id: int, sig: int = signal.SIGTERM, *, whole_group: bool = True
) -> bool:
    """Signal the driver's whole process group (Spark's JVM included), or with
    ``whole_group=False`` the driver alone, so that it can still stop its query cleanly
    (its JVM exits with it); False if the driver is gone."""
    if not driver_alive(pid, run_id):
        return False
    assert pid is not None
    try:
        if whole_group:
            os.killpg(os.getpgid(pid), sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def log_tail(path: Path, *, lines: int = 15) -> str:
    """The last lines of a driver log, for a failed run's cause."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])
