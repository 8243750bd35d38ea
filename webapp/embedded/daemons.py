"""What the embedded servers share: the errors, lock files, loopback ports, daemon processes."""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self, overload

import psutil

LOOPBACK = "127.0.0.1"
LOCK_TIMEOUT_S = 120.0  # another process may be running initdb, which takes a few seconds
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


class EmbeddedError(Exception):
    """Root of every error raised by the embedded services."""


class EmbeddedServiceError(EmbeddedError):
    """An embedded server could not be started, reached or stopped."""

    def __init__(self, *, service: str, step: str, detail: str, log_file: Path) -> None:
        self.service = service
        self.step = step
        self.log_file = log_file
        super().__init__(f"embedded {service}: {step} failed: {detail} (see log {log_file})")


@contextmanager
def exclusive_lock(
    path: Path, *, timeout: float, on_timeout: EmbeddedServiceError
) -> Iterator[None]:
    """Hold an exclusive flock on ``path``; polling so that a stuck holder cannot hang us."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise on_timeout from None
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class InFolder:
    """A file of a ``ServiceFolder``, read as its path: ``name`` inside the folder's root,
    where ``{service}`` stands for the service's name."""

    def __init__(self, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, folder: None, owner: type) -> InFolder: ...

    @overload
    def __get__(self, folder: ServiceFolder, owner: type) -> Path: ...

    def __get__(self, folder: ServiceFolder | None, owner: type) -> InFolder | Path:
        if folder is None:
            return self
        return folder.root / self.name.format(service=folder.service)


@dataclass(frozen=True)
class ServiceFolder:
    """The folder of one embedded server: its log, its lock file, the port it chose and its
    password, each in a file of its own. A subclass names its server where it is declared:
    ``class _NatsFiles(DaemonFolder, service="nats", executable="nats-server")``."""

    root: Path

    service: ClassVar[str]  # "postgres", "redis": names the folder, its files and its errors
    executable: ClassVar[str]  # what the server's processes run, to tell them from others

    log = InFolder("{service}.log")
    lock = InFolder("{service}.lock")
    port = InFolder("port")
    password = InFolder("password")

    def __init_subclass__(cls, *, service: str = "", executable: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if service:
            cls.service, cls.executable = service, executable

    @classmethod
    def under(cls, var_dir: Path, name: str | None = None, **settings: Any) -> Self:
        """The server's folder in ``var_dir``, named after its service unless ``name`` says
        otherwise, by its absolute path (the server and its clients outlive the caller's
        working folder)."""
        return cls(root=Path(var_dir).resolve() / (name or cls.service), **settings)

    def error(self, step: str, detail: str) -> EmbeddedServiceError:
        """The error of ``step``, pointing at the server's log."""
        return EmbeddedServiceError(service=self.service, step=step, detail=detail,
                                    log_file=self.log)

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """The folder's lock, held while a server is started, reused or stopped."""
        busy = self.error("lock", f"{self.lock} held by another process for too long")
        return exclusive_lock(self.lock, timeout=LOCK_TIMEOUT_S, on_timeout=busy)


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """True if nothing listens on ``host:port`` (SO_REUSEADDR ignores TIME_WAIT leftovers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


# Server ports come from below the kernel's ephemeral range: a port from that range, once its
# server stops, can be taken by any outgoing connection, and the server could not get it back.
_SERVER_PORTS = (20000, 32768)
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# Keeping the recorded port keeps the URLs that running clients already hold valid.
RECORDED_PORT_WAIT_S = 3.0


def choose_port(port_file: Path) -> int:
    """Reuse the recorded port if it is free, else pick a free one outside the ephemeral range
    (the kernel's choice if none is found); record the choice."""
    recorded = read_int(port_file)
    if recorded is not None and _frees_up(recorded, within_s=RECORDED_PORT_WAIT_S):
        return recorded
    port = _free_server_port()
    port_file.write_text(f"{port}\n")
    return port


def _frees_up(port: int, *, within_s: float) -> bool:
    """Whether ``port`` is free now or within ``within_s``: just after a server was killed,
    the kernel may hold its port for a moment while the server's connections close."""
    deadline = time.monotonic() + within_s
    while not port_is_free(port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _free_server_port() -> int:
    low, high = _SERVER_PORTS
    try:
        high = min(high, int(_EPHEMERAL_RANGE.read_text().split()[0]))
    except (OSError, ValueError, IndexError):
        pass
    candidates = random.Random().sample(range(low, high), k=min(64, max(high - low, 0)))
    for port in candidates:
        if port_is_free(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def read_int(path: Path) -> int | None:
    """The integer on the first line of ``path``, or None if missing or garbled."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def live_process(pid: int | None, *, name: str) -> psutil.Process | None:
    """The process ``pid`` if it is alive and its executable is ``name`` (guards pid reuse)."""
    if pid is None or pid <= 0:  # initdb's bootstrap backend records its pid negated
        return None
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE or process.name() != name:
            return None
        return process
    except psutil.Error:
        return None


def refuse_other_network(folder: ServiceFolder, process: psutil.Process) -> None:
    """Raises EmbeddedServiceError if the folder's running server ``process`` lives in another
    network namespace than this process (started inside ``unshare -n``, say): its loopback
    address is not this one's, so it can never be reached from here, and a second server on
    the same files would corrupt them."""
    try:
        theirs = os.readlink(f"/proc/{process.pid}/ns/net")
        mine = os.readlink("/proc/self/ns/net")
    except OSError:  # not Linux, or the process just exited: nothing to tell
        return
    if theirs != mine:
        raise folder.error(
            "wait", f"{folder.executable} pid {process.pid} runs in another network namespace "
            f"({theirs}, this process: {mine}) and cannot be reached from here; stop it "
            f"(kill {process.pid}) or give this process its own STREAMSCALE_VAR_DIR")


def gone(process: psutil.Process, *, timeout: float) -> bool:
    """Wait until ``process`` has exited; a zombie counts as exited (its reaper may be slow)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


def stop_server(folder: ServiceFolder, find: Callable[[], psutil.Process | None], *,
                first_signal: int, leftovers: tuple[Path, ...] = ()) -> None:
    """Stop the folder's server that ``find`` finds, under the folder's lock: ``first_signal``,
    then SIGKILL if it lingers, then remove its ``leftovers`` (a pid file); no-op if none runs.
    Raises EmbeddedServiceError if it is still alive."""
    if not folder.root.exists():
        return
    with folder.locked():
        process = find()
        if process is None:
            return
        terminate(process, first_signal=first_signal)
        if live_process(process.pid, name=folder.executable) is not None:
            raise folder.error("stop", f"{folder.executable} pid {process.pid} did not exit")
        for path in leftovers:
            path.unlink(missing_ok=True)


def terminate(process: psutil.Process, *, first_signal: int) -> None:
    """Signal ``process``, wait, then SIGKILL it if it is still there."""
    try:
        process.send_signal(first_signal)
        if not gone(process, timeout=STOP_TIMEOUT_S):
            process.kill()
            gone(process, timeout=5)
    except psutil.NoSuchProcess:
        return


@dataclass(frozen=True)
class DaemonFolder(ServiceFolder):
    """The folder of a server that runs as a daemon from a generated config file and records
    its pid in a file of its own (Redis, NATS)."""

    config = InFolder("{service}.conf")
    pid = InFolder("{service}.pid")

    def command_mark(self, port: int) -> str:
        """What the command line of this folder's running server on ``port`` contains."""
        return str(self.config)


def running_daemon(folder: DaemonFolder) -> tuple[psutil.Process, int] | None:
    """The folder's running server and its port (pid file plus a check of its command)."""
    process = live_process(read_int(folder.pid), name=folder.executable)
    port = read_int(folder.port)
    if process is None or port is None:
        return None
    try:
        ours = folder.command_mark(port) in " ".join(process.cmdline())
    except psutil.Error:
        return None
    return (process, port) if ours else None


def write_private(path: Path, text: str) -> None:
    """Write ``text`` (a config holding a password) to a file readable by its owner only."""
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(text)


def start_daemon(folder: DaemonFolder, command: list[str], *, config: Callable[[int], str],
                 answers: Callable[[int], bool]) -> int:
    """Choose a port, write the folder's ``config`` for it, run ``command`` (which returns once
    the server runs in the background) and wait until the server ``answers``; its port."""
    folder.pid.unlink(missing_ok=True)  # stale after a SIGKILL; the daemon writes a fresh one
    port = choose_port(folder.port)
    write_private(folder.config, config(port))
    try:
        launched = subprocess.run(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            cwd=folder.root, timeout=START_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise folder.error("start", str(exc)) from exc
    if launched.returncode != 0:
        said = launched.stderr.decode(errors="replace").strip()
        raise folder.error("start", said or f"{command[0]} exited with {launched.returncode}")
    wait_for_answer(folder, port, answers, step="start")
    return port


def wait_for_answer(folder: DaemonFolder, port: int, answers: Callable[[int], bool], *,
                    step: str) -> None:
    """Wait until the server on ``port`` answers (a big data file takes a while to load); fail
    fast if it died.

    The daemon writes its pid file once it listens, so a missing file after a few seconds, or a
    pid file of a dead process, means it exited (a port taken meanwhile, a bad file...).
    """
    started = time.monotonic()
    while not answers(port):
        elapsed = time.monotonic() - started
        pid = read_int(folder.pid)
        if (pid is None and elapsed > 5) or (pid is not None and not psutil.pid_exists(pid)):
            raise folder.error(step, f"{folder.executable} for port {port} exited")
        if elapsed > START_TIMEOUT_S:
            raise folder.error(step, f"no answer on {LOOPBACK}:{port} in time")
        time.sleep(0.05)


def ensure_daemon(folder: DaemonFolder, *, start: Callable[[], int],
                  answers: Callable[[int], bool],
                  adopt: Callable[[int], None] = lambda port: None) -> int:
    """The port of the folder's server: reused once it answers (and ``adopt``-ed, to bring an
    older one up to date), else ``start``-ed; under the folder's lock, so that several
    processes may call it at once."""
    folder.root.mkdir(parents=True, exist_ok=True)
    with folder.locked():
        running = running_daemon(folder)
        if running is None:
            return start()
        process, port = running
        refuse_other_network(folder, process)
        # Never killed here: a server still loading its data is slow, not broken.
        wait_for_answer(folder, port, answers, step="wait")
        adopt(port)
        return port


def stop_daemon(folder: DaemonFolder) -> None:
    """Stop the folder's server (SIGTERM lets it flush its files); no-op if none runs."""

    def find() -> psutil.Process | None:
        running = running_daemon(folder)
        return None if running is None else running[0]

    stop_server(folder, find, first_signal=signal.SIGTERM, leftovers=(folder.pid,))
