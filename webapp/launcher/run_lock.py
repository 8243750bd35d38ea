"""The exclusive ``var/run.lock`` that lets only one launcher run per var folder."""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

RUN_LOCK_NAME = "run.lock"


@dataclass(frozen=True)
class RunLock:
    """A held lock; the open descriptor is the lock, so closing it releases it."""

    path: Path
    fd: int

    def release(self) -> None:
        """Release the lock (the kernel also does this if the process dies)."""
        os.close(self.fd)


@dataclass(frozen=True)
class LockHolder:
    """What the running launcher wrote into the lock file."""

    pid: int | None
    url: str | None


def acquire_run_lock(*, var_dir: Path, url: str) -> RunLock | LockHolder:
    """Take the lock and record our pid and URL in it, or describe the launcher holding it.

    When the lock is held nothing is written: the file is opened without truncation.
    """
    var_dir.mkdir(parents=True, exist_ok=True)
    path = var_dir / RUN_LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read_holder(fd)
        os.close(fd)
        return holder
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n{url}\n".encode(), 0)
    return RunLock(path=path, fd=fd)


def run_lock_holder(*, var_dir: Path) -> LockHolder | None:
    """The launcher holding the lock of ``var_dir``, or None if no launcher runs there."""
    path = var_dir / RUN_LOCK_NAME
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_holder(fd)
    finally:
        os.close(fd)
    return None


def _read_holder(fd: int) -> LockHolder:
    """Parse ``pid\\nurl`` written by the holder; tolerate a holder still writing it."""
    lines = os.pread(fd, 4096, 0).decode(errors="replace").splitlines()
    pid = int(lines[0]) if lines and lines[0].strip().isdigit() else None
    url = lines[1].strip() if len(lines) > 1 and lines[1].strip() else None
    return LockHolder(pid=pid, url=url)
