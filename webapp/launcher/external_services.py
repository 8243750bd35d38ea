"""PostgreSQL and Redis given by DATABASE_URL / REDIS_URL: checked before anything starts.

The database is created when the server has none of that name (as the embedded server's is),
so pointing the product at a fresh PostgreSQL needs no manual step. A server that cannot be
reached stops start-up with a message naming the variable.
"""

from __future__ import annotations

import psycopg2
import redis

from webapp.config import parse_database_url
from webapp.embedded import EmbeddedError
from webapp.embedded.postgres_server import create_database_if_missing


class ServiceUnreachable(EmbeddedError):
    """A configured server did not answer, or refused what start-up needs."""


def ensure_database(url: str) -> bool:
    """Create the database of ``url`` if its server lacks it; True if it was created."""
    settings = parse_database_url(url)
    name = str(settings["NAME"])
    try:
        conn = psycopg2.connect(
            host=settings["HOST"] or None, port=settings["PORT"] or None,
            user=settings["USER"] or None, password=settings["PASSWORD"] or None,
            dbname="postgres", connect_timeout=5,
        )
    except psycopg2.Error as error:
        raise ServiceUnreachable(
            f"DATABASE_URL: cannot reach PostgreSQL: {_first_line(error)}") from error
    try:
        return create_database_if_missing(conn, name)
    except psycopg2.Error as error:
        raise ServiceUnreachable(
            f"DATABASE_URL: database {name!r} is missing and could not be created: "
            f"{_first_line(error)}") from error
    finally:
        conn.close()


def check_redis(url: str) -> None:
    """Raise ServiceUnreachable unless the Redis server of ``url`` answers PING."""
    try:
        redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5).ping()
    except redis.RedisError as error:
        raise ServiceUnreachable(f"REDIS_URL: cannot reach Redis: {error}") from error


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
