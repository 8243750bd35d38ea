"""Fixtures of the Spark runtime tests: Redis and Postgres reached through the product's
settings (the embedded servers unless ``DATABASE_URL`` / ``REDIS_URL`` name others); their
Spark session is the suite's (tests/conftest.py)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import with_database

POSTGRES_DB = "streamscale_runtime_test"

# py4j logs at INFO while the interpreter shuts down, after pytest closed its streams.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def redis_url(service_urls: dict[str, str]) -> str:
    """The suite's Redis: the product's (embedded unless ``REDIS_URL`` is set)."""
    return service_urls["redis_url"]


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A unique key prefix on the suite's Redis; its keys are deleted afterwards."""
    import redis

    prefix = f"sstest-{uuid.uuid4().hex[:8]}:"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match=f"{prefix}*", count=1000):
        client.delete(key)


@pytest.fixture(scope="session")
def postgres_dsn(service_urls: dict[str, str]) -> str:
    """A URL of a dedicated test database on the suite's PostgreSQL (created if missing)."""
    import psycopg2

    admin = psycopg2.connect(with_database(service_urls["database_url"], "postgres"))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (POSTGRES_DB,))
        if cur.fetchone() is None:
            cur.execute(f"CREATE DATABASE {POSTGRES_DB}")
    admin.close()
    return with_database(service_urls["database_url"], POSTGRES_DB)
