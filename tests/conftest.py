"""Fixtures shared by the whole suite."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

# py4j logs at INFO while the interpreter shuts down, after pytest closed its streams.
logging.getLogger("py4j").setLevel(logging.WARNING)

ROOT = Path(__file__).resolve().parent.parent

# Every JVM the suite starts (its own, the drivers', a cluster's) lives seconds to minutes: C1
# alone compiles sooner and takes less of the cores from the run than C1 then C2, which a
# product driver, running for days, keeps. JDK_JAVA_OPTIONS reaches each `java` it starts.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


# Fixtures through which a test reaches PostgreSQL or Redis; a test using one is marked
# ``services``, so ``make test-external`` can run exactly those against other servers.
_SERVICE_FIXTURES = {"service_urls", "db", "transactional_db", "live_server", "django_db_setup"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _SERVICE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.services)


@pytest.fixture(scope="session")
def service_urls() -> dict[str, str]:
    """The Postgres, Redis and NATS URLs the suite uses: from the environment, else the embedded
    servers.

    Engine tests that need a real Postgres or Redis take them from here, so the suite runs with
    nothing configured, like the product.
    """
    database_url = os.environ.get("DATABASE_URL")
    redis_url = os.environ.get("REDIS_URL")
    nats_url = os.environ.get("NATS_URL")
    if not database_url or not redis_url or not nats_url:
        from webapp import embedded
        from webapp.config import load_config

        var_dir = load_config().var_dir
        database_url = database_url or embedded.ensure_postgres(var_dir=var_dir)
        redis_url = redis_url or embedded.ensure_redis(var_dir=var_dir)
        nats_url = nats_url or embedded.ensure_nats(var_dir=var_dir)
    return {"database_url": database_url, "redis_url": redis_url, "nats_url": nats_url}


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """The local[2] session every in-process Spark test shares, and the checks of what a
    whole stack wrote: each JVM start is seconds of the suite's cores."""
    from engine.runtime.spark.session import build_session

    session = build_session(master="local[2]", app_name="streamscale-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def python_executable() -> str:
    return sys.executable


def with_database(url: str, name: str) -> str:
    """``url`` (``postgres://...``) naming database ``name`` instead."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))
