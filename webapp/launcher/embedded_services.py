"""The PostgreSQL, Redis and NATS the launcher's children use, and which of them it must stop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
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
    nats_url: str = ""
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
    *, var_dir: Path, database_url: str | None, redis_url: str | None, services: Services,
    nats_url: str | None = None,
) -> None:
    """Fill ``services`` with the URLs, starting (or adopting) embedded servers for the unset
    ones and checking the configured ones (their database is created if missing). Every
    embedded server is ours to stop, even if its start was interrupted half-way."""
    if database_url is not None and ensure_database(database_url):
        say("[launcher] created the database of DATABASE_URL")
    if redis_url is not None:
        check_redis(redis_url)
    if database_url is None:
        database_url = _ensure_embedded(
            "PostgreSQL", services, running=partial(embedded.postgres_running, var_dir=var_dir),
            ensure=partial(embedded.ensure_postgres, var_dir=var_dir),
            stop=partial(embedded.stop_postgres, var_dir=var_dir))
    if redis_url is None:
        redis_url = _ensure_embedded(
            "Redis", services, running=partial(embedded.redis_running, var_dir=var_dir),
            ensure=partial(embedded.ensure_redis, var_dir=var_dir),
            stop=partial(embedded.stop_redis, var_dir=var_dir))
    if services.state_redis:
        # The keyed state's own Redis (every write fsynced), for runs on a standalone cluster.
        _ensure_embedded(
            "state Redis", services,
            running=partial(embedded.state_redis_running, var_dir=var_dir),
            ensure=partial(embedded.ensure_state_redis, var_dir=var_dir),
            stop=partial(embedded.stop_state_redis, var_dir=var_dir))
    if nats_url is None:  # for jobs reading source.nats with `url: env:NATS_URL`
        nats_url = _ensure_embedded(
            "NATS", services, running=partial(embedded.nats_running, var_dir=var_dir),
            ensure=partial(embedded.ensure_nats, var_dir=var_dir),
            stop=partial(embedded.stop_nats, var_dir=var_dir))
    services.database_url, services.redis_url = database_url, redis_url
    services.nats_url = nats_url


def _ensure_embedded(
    name: str, services: Services, *, running: Callable[[], bool], ensure: Callable[[], str],
    stop: Callable[[], None],
) -> str:
    """Start or reuse one embedded server, watched from now on; its URL. It is ours to stop
    even if it was running before: the run lock makes this launcher the only one of its var
    folder, so a server already running there was left by a launcher that was killed (or
    started by ``services``), and Ctrl-C must leave nothing behind."""
    services.stoppers.append(stop)
    url = ensure()
    say(f"[launcher] embedded {name} at {redacted(url)}")
    services.watched[name] = (running, ensure)
    return url
