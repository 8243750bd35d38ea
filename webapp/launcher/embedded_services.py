"""The PostgreSQL and Redis the launcher's children use, and which of them it must stop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from webapp import embedded
from webapp.embedded.credentials import redacted
from webapp.launcher.children import say
from webapp.launcher.external_services import check_redis, ensure_database


@dataclass
class Services:
    """URLs the children get, and the embedded servers this launcher must stop on exit."""

    database_url: str
    redis_url: str
    stoppers: list[Callable[[], None]] = field(default_factory=list)
    migrated: bool = False  # the database holds our tables: drivers can be looked up
    state_redis: bool = False  # a standalone cluster with no STATE_REDIS_URL: start our own
    # The embedded servers in use: name -> (is it running, start it again).
    watched: dict[str, tuple[Callable[[], bool], Callable[[], object]]] = field(
        default_factory=dict)

    def restart_dead(self) -> list[str]:
        """Start again every watched server that is not running; their names."""
        restarted = []
        for name, (running, ensure) in self.watched.items():
            if not running():
                try:
                    ensure()
                except embedded.EmbeddedError as error:
                    say(f"[launcher] could not start embedded {name} again: {error}")
                    continue
                restarted.append(name)
        return restarted

    def stop_started(self) -> None:
        for stop in reversed(self.stoppers):
            try:
                stop()
            except Exception as error:  # report and go on: the rest must still be stopped
                say(f"[launcher] could not stop an embedded service: {error}")


def ensure_services(
    *, var_dir: Path, database_url: str | None, redis_url: str | None, services: Services
) -> None:
    """Fill ``services`` with the URLs, starting embedded servers for the unset ones and
    checking the configured ones (their database is created if missing).

    A server counts as ours to stop if it was not running before, even if its start was
    interrupted half-way.
    """
    if database_url is not None and ensure_database(database_url):
        say("[launcher] created the database of DATABASE_URL")
    if redis_url is not None:
        check_redis(redis_url)
    if database_url is None:
        if not embedded.postgres_running(var_dir=var_dir):
            services.stoppers.append(lambda: embedded.stop_postgres(var_dir=var_dir))
        database_url = embedded.ensure_postgres(var_dir=var_dir)
        say(f"[launcher] embedded PostgreSQL at {redacted(database_url)}")
        services.watched["PostgreSQL"] = (
            lambda: embedded.postgres_running(var_dir=var_dir),
            lambda: embedded.ensure_postgres(var_dir=var_dir))
    if redis_url is None:
        if not embedded.redis_running(var_dir=var_dir):
            services.stoppers.append(lambda: embedded.stop_redis(var_dir=var_dir))
        redis_url = embedded.ensure_redis(var_dir=var_dir)
        say(f"[launcher] embedded Redis at {redacted(redis_url)}")
        services.watched["Redis"] = (
            lambda: embedded.redis_running(var_dir=var_dir),
            lambda: embedded.ensure_redis(var_dir=var_dir))
    if services.state_redis:
        _ensure_state_redis(var_dir=var_dir, services=services)
    services.database_url, services.redis_url = database_url, redis_url


def _ensure_state_redis(*, var_dir: Path, services: Services) -> None:
    """The keyed state's own Redis (every write fsynced), for runs on a standalone cluster."""
    if not embedded.state_redis_running(var_dir=var_dir):
        services.stoppers.append(lambda: embedded.stop_state_redis(var_dir=var_dir))
    url = embedded.ensure_state_redis(var_dir=var_dir)
    say(f"[launcher] embedded state Redis at {redacted(url)}")
    services.watched["state Redis"] = (
        lambda: embedded.state_redis_running(var_dir=var_dir),
        lambda: embedded.ensure_state_redis(var_dir=var_dir))
