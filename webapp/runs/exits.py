"""How a run's driver ended, as its watcher learns it: the exit status its reaper recorded
(``webapp.runs.process``) and, for a failed query, the one-line cause the driver recorded
before exiting.

Both records name the driver's pid, so a record left by an earlier driver of the run is never
taken for the last one's.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

EXIT_FILE = "driver-exit.json"
CAUSE_FILE = "driver-cause.json"
SUSPENDED = 0  # the exit status of a driver that suspended its run cleanly
# The exit status of a driver that ended on the job's own error (``RunFailure.kind`` "job"):
# its watcher fails the run at once instead of restarting it. Any other end is transient.
JOB_ERROR = 3


@dataclass(frozen=True)
class DriverEnd:
    """A driver's exit status (negative: the signal that killed it), its own cause, the
    operator that cause arose in, and when it ended (epoch seconds, as the reaper saw it)."""

    pid: int
    code: int | None
    cause: str = ""
    operator: str | None = None
    ended_at: float | None = None

    @property
    def job_error(self) -> bool:
        """The driver ended on the job's own error: a restart would meet it again."""
        return self.code == JOB_ERROR

    @property
    def suspended(self) -> bool:
        """The driver stopped its query cleanly and left the run to resume later."""
        return self.code == SUSPENDED

    def describe(self) -> str:
        """``exited with code 1: <cause>``, ``killed by SIGKILL``, or ``ended without a trace``."""
        if self.code is None:
            how = "ended (its exit status was not recorded)"
        elif self.code < 0:
            how = f"was killed by {_signal_name(-self.code)}"
        else:
            how = f"exited with code {self.code}"
        return f"{how}: {self.cause}" if self.cause else how


def driver_cause_record(folder: Path, *, cause: str, operator: str | None = None) -> None:
    """Written by the driver itself, before it exits on a failure."""
    _write(folder / CAUSE_FILE, {"pid": os.getpid(), "cause": cause, "operator": operator})


def driver_end(folder: Path, *, pid: int | None, wait_s: float = 2.0) -> DriverEnd | None:
    """How the driver ``pid`` ended, or None when nothing is known of it. The reaper records
    the exit a moment after the driver is gone: it is given up to ``wait_s`` to do so."""
    if not pid:
        return None
    deadline = time.monotonic() + wait_s
    exit_record = _read(folder / EXIT_FILE, pid=pid)
    while exit_record is None and time.monotonic() < deadline:
        time.sleep(0.05)
        exit_record = _read(folder / EXIT_FILE, pid=pid)
    cause_record = _read(folder / CAUSE_FILE, pid=pid)
    if exit_record is None and cause_record is None:
        return None
    code = exit_record.get("code") if exit_record else None
    cause = str(cause_record.get("cause", "")) if cause_record else ""
    operator = cause_record.get("operator") if cause_record else None
    at = exit_record.get("at") if exit_record else None
    return DriverEnd(pid=pid, code=code if isinstance(code, int) else None, cause=cause,
                     operator=operator if isinstance(operator, str) else None,
                     ended_at=float(at) if isinstance(at, int | float) else None)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _write(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, json.dumps(record))


def write_whole(path: Path, text: str) -> None:
    """Replaces ``path`` in one step: a reader never sees half of it."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(text)
    os.replace(partial, path)


def _read(path: Path, *, pid: int) -> dict | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("pid") == pid else None
