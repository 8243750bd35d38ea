"""DATABASE_URL / REDIS_URL servers: the database is created when missing, and a server that
does not answer stops start-up with the variable named."""

from __future__ import annotations

import socket
import uuid

import psycopg2
import pytest

from tests.conftest import with_database
from webapp.launcher.external_services import ServiceUnreachable, check_redis, ensure_database


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_missing_database_is_created_once(service_urls: dict[str, str]) -> None:
    name = f"streamscale_ext_{uuid.uuid4().hex[:8]}"
    url = with_database(service_urls["database_url"], name)
    try:
        assert ensure_database(url) is True
        assert ensure_database(url) is False
        conn = psycopg2.connect(url)
        try:
            with conn.cursor() as cursor:
                cursor.execute("SELECT current_database()")
                assert cursor.fetchone() == (name,)
        finally:
            conn.close()
    finally:
        admin = psycopg2.connect(with_database(service_urls["database_url"], "postgres"))
        admin.autocommit = True
        with admin.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.close()


def test_an_unreachable_postgres_names_the_variable() -> None:
    url = f"postgres://postgres@127.0.0.1:{_closed_port()}/streamscale"
    with pytest.raises(ServiceUnreachable, match=r"^DATABASE_URL: cannot reach PostgreSQL: "):
        ensure_database(url)


def test_a_reachable_redis_passes_and_an_unreachable_one_names_the_variable(
    service_urls: dict[str, str],
) -> None:
    check_redis(service_urls["redis_url"])
    with pytest.raises(ServiceUnreachable, match=r"^REDIS_URL: cannot reach Redis: "):
        check_redis(f"redis://127.0.0.1:{_closed_port()}/0")
