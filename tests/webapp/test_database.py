"""The product's PostgreSQL backend: a lasting connection is health-checked at most once a
second, and one that fails its check is replaced."""

from __future__ import annotations

import time

import pytest
from django.db import connections

from webapp.database.base import RECHECK_S, DatabaseWrapper

pytestmark = pytest.mark.django_db


@pytest.fixture
def connection():
    """A connection of its own, outside the test's transaction (where close() cannot close)."""
    made = connections.create_connection("default")
    yield made
    made.close()


@pytest.fixture
def checks(monkeypatch, connection):
    """The health checks the connection runs; each answers what ``usable`` holds."""
    made: list[float] = []
    usable = {"answer": True}

    def is_usable(self) -> bool:
        made.append(time.monotonic())
        return usable["answer"]

    monkeypatch.setattr(DatabaseWrapper, "is_usable", is_usable)
    connection.ensure_connection()
    monkeypatch.setattr(connection, "health_check_enabled", True)
    return made, usable


def _next_request(connection) -> None:
    connection.health_check_done = False  # what Django does as each request starts
    connection.close_if_health_check_failed()


def test_the_product_uses_this_backend(connection):
    assert isinstance(connection, DatabaseWrapper)


def test_a_connection_checked_within_the_second_is_reused_unchecked(checks, connection):
    made, _ = checks
    connection.checked_at = float("-inf")
    _next_request(connection)
    _next_request(connection)
    _next_request(connection)
    assert len(made) == 1
    assert connection.connection is not None


def test_a_connection_is_checked_again_after_a_second_and_replaced_if_dead(checks, connection):
    made, usable = checks
    _next_request(connection)
    connection.checked_at = time.monotonic() - RECHECK_S - 0.01
    usable["answer"] = False
    _next_request(connection)
    assert len(made) == 1
    assert connection.connection is None  # closed: the next query reconnects
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
