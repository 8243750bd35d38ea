"""Child processes of the launcher: one process group each, output prefixed line by line.

Nothing outlives the launcher: each child gets SIGTERM from the kernel when the launcher dies,
even by SIGKILL (Linux's parent-death signal), and the children's pids are kept in a file so
that the next launcher of the same var folder stops any that are left (``stop_left_behind``).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import psutil

_print_lock = threading.Lock()
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
LEFT_BEHIND_GRACE_S = 10.0


def say(line: str) -> None:
    """Print one whole line at once, flushed, so lines of concurrent children never interleave."""
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


@dataclass
class Child:
    """A running child; ``name`` is the prefix of its output (``[web] ...``)."""

    name: str
    process: subprocess.Popen[bytes]
    pump: threading.Thread
    argv: tuple[str, ...] = ()
    started_at: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.process.pid


def _pump_output(name: str, stream: IO[bytes]) -> None:
    """Copy the child's output to ours with its prefix until the child closes it."""
    for raw in iter(stream.readline, b""):
        say(f"[{name}] {raw.decode(errors='replace').rstrip()}")
    stream.close()


@dataclass
class ChildGroup:
    """The children of one launcher, stopped together."""

    cwd: Path
    env: Mapping[str, str]
    children: list[Child] = field(default_factory=list)
    pid_file: Path | None = None  # where the children's pids are kept for the next launcher

    def start(self, name: str, argv: Sequence[str]) -> Child:
        """Start ``argv`` in a new session, so a terminal's Ctrl-C reaches only the launcher."""
        process = subprocess.Popen(
            list(argv),
            cwd=self.cwd,
            env=dict(self.env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_dies_with(os.getpid()),
        )
        assert process.stdout is not None
        pump = threading.Thread(target=_pump_output, args=(name, process.stdout), daemon=True)
        pump.start()
        child = Child(name=name, process=process, pump=pump, argv=tuple(argv))
        self.children.append(child)
        self._record_pids()
        return child

    def _record_pids(self) -> None:
        """Each child's pid and start time (which tells it from a later process of the same
        pid), rewritten whole so that a reader never sees half a list."""
        if self.pid_file is None:
            return
        alive = []
        for child in self.children:
            try:
                alive.append([child.pid, psutil.Process(child.pid).create_time()])
            except psutil.Error:
                continue  # already gone: nothing to stop later
        partial = self.pid_file.with_suffix(".tmp")
        partial.write_text(json.dumps(alive))
        partial.replace(self.pid_file)

    def restart(self, child: Child) -> Child:
        """Replace an exited child by a new process of the same command, grandchildren
        it left behind stopped first."""
        self.stop([child.name], grace_s=2.0)
        return self.start(child.name, child.argv)

    def run_step(self, name: str, argv: Sequence[str]) -> int:
        """Run a one-shot command to completion (still stoppable by ``stop_all``)."""
        child = self.start(name, argv)
        code = child.process.wait()
        child.pump.join(timeout=5)
        self.children.remove(child)
        return code

    def first_exited(self) -> Child | None:
        """A child that has exited, if any."""
        return next((c for c in self.children if c.process.poll() is not None), None)

    def stop_all(self, *, grace_s: float = 10.0) -> None:
        """Stop every child (see ``stop``)."""
        self.stop([c.name for c in self.children], grace_s=grace_s)

    def stop(self, names: Sequence[str], *, grace_s: float = 10.0) -> None:
        """SIGTERM the named children's groups, wait up to ``grace_s``, SIGKILL what is left,
        grandchildren too.

        Descendants are listed before signalling: one that left its group (a new session) or was
        orphaned would otherwise escape both signals.
        """
        chosen = [c for c in self.children if c.name in names]
        descendants = [p for c in chosen for p in _descendants(c.pid)]
        for child in chosen:
            _signal_group(child, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for child in chosen:
            try:
                child.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say(f"[launcher] {child.name} did not stop in {grace_s:.0f} s; killing it")
        for child in chosen:
            _signal_group(child, signal.SIGKILL)
            child.process.wait()
        _kill_leftovers(descendants, deadline=deadline)
        for child in chosen:
            child.pump.join(timeout=2)
            self.children.remove(child)
        self._record_pids()


def _dies_with(parent: int):
    """A preexec_fn asking the kernel to SIGTERM the child when its parent dies; if the
    parent died before the request took effect, the child ends at once."""
    libc = ctypes.CDLL(None, use_errno=True)

    def arrange() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return arrange


def stop_left_behind(pid_file: Path) -> list[int]:
    """Stop the process groups of children an earlier launcher left (its pids in
    ``pid_file``, killed with it: the parent-death signal may not have ended them, or
    their own children): SIGTERM, then SIGKILL after ``LEFT_BEHIND_GRACE_S``. Their pids."""
    try:
        recorded = json.loads(pid_file.read_text())
    except (OSError, ValueError):
        return []
    left = []
    for pid, created in recorded:
        try:
            process = psutil.Process(pid)
            if abs(process.create_time() - created) < 0.01:
                left.append(process)
        except psutil.Error:
            continue
    members = [m for p in left for m in [p, *_descendants(p.pid)]]
    for process in left:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    _kill_leftovers(members, deadline=time.monotonic() + LEFT_BEHIND_GRACE_S)
    pid_file.unlink(missing_ok=True)
    return [p.pid for p in left]


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _signal_group(child: Child, sig: signal.Signals) -> None:
    """Signal the child's whole process group (its pid is the group id: new session)."""
    try:
        os.killpg(child.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


def _kill_leftovers(processes: list[psutil.Process], *, deadline: float) -> None:
    """Give descendants what is left of the grace period, then SIGKILL the survivors."""
    _, alive = psutil.wait_procs(processes, timeout=max(0.1, deadline - time.monotonic()))
    for process in alive:
        try:
            process.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=5)
