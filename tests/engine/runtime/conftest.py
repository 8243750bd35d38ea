"""Fixtures of the Spark runtime tests: one shared local[2] SparkSession, Redis and
Postgres at their test addresses, and job documents built for exact checks."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator

import pytest

REDIS_URL = os.environ.get("STREAMSCALE_TEST_REDIS", "redis://127.0.0.1:6379/9")
POSTGRES_ADMIN_DSN = os.environ.get(
    "STREAMSCALE_TEST_POSTGRES", "host=127.0.0.1 port=5432 user=postgres dbname=postgres"
)
POSTGRES_DB = "streamscale_runtime_test"

# py4j logs at INFO while the interpreter shuts down, after pytest closed its streams.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """The session every in-process Spark test shares (a JVM start costs ~8 s)."""
    from engine.runtime.session import build_session

    session = build_session(master="local[2]", app_name="streamscale-runtime-tests")
    yield session
    session.stop()


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A unique key prefix on the test Redis database; its keys are deleted afterwards."""
    import redis

    prefix = f"sstest-{uuid.uuid4().hex[:8]}:"
    yield prefix
    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(match=f"{prefix}*", count=1000):
        client.delete(key)


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """A DSN of a dedicated test database (created if missing)."""
    import psycopg2

    admin = psycopg2.connect(POSTGRES_ADMIN_DSN)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (POSTGRES_DB,))
        if cur.fetchone() is None:
            cur.execute(f"CREATE DATABASE {POSTGRES_DB}")
    admin.close()
    return f"host=127.0.0.1 port=5432 user=postgres dbname={POSTGRES_DB}"
