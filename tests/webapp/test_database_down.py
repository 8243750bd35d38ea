"""With PostgreSQL down, the API answers 503 JSON ``{error, problems}`` with ``Retry-After``
(never a 500 HTML page), with or without a bearer token, pages answer 503 naming the database,
and ``/healthz`` names what failed, Celery beat included."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connections
from django.test import Client

from webapp.accounts.roles import Role

pytestmark = pytest.mark.django_db(transaction=True)


def _port_where_nothing_listens() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def database_down() -> Iterator[None]:
    """Every new connection of this process goes to a port where nothing listens, as while
    the server restarts; the open ones are closed so that none is reused."""
    database = connections["default"].settings_dict  # shared by every thread's connection
    port = database["PORT"]
    connections.close_all()
    database["PORT"] = str(_port_where_nothing_listens())
    try:
        yield
    finally:
        connections.close_all()
        database["PORT"] = port


def _answering(client: Client) -> Client:
    """The test client re-raises a request's error by default; a browser gets the answer."""
    client.raise_request_exception = False
    return client


def _assert_database_503(response) -> None:
    assert response.status_code == 503, response.content[:300]
    assert response["Content-Type"] == "application/json"
    assert response["Retry-After"] == "5"
    body = response.json()
    assert set(body) == {"error", "problems"}
    assert body["error"].startswith("PostgreSQL (DATABASE_URL) is unreachable: ")
    assert body["problems"] == [{"where": "request", "message": body["error"]}]


def test_a_token_request_is_503_json_when_the_token_cannot_be_looked_up(token_client):
    reader = _answering(token_client(Role.VIEWER))  # made while the database is up
    with database_down():
        _assert_database_503(reader.get("/api/jobs"))
        _assert_database_503(reader.post("/api/jobs", data="{}",
                                         content_type="application/json"))


def test_a_signed_in_api_request_without_a_token_is_503_json(session_client):
    client = _answering(session_client(Role.VIEWER))
    with database_down():
        _assert_database_503(client.get("/api/jobs"))


def test_a_page_is_503_naming_the_database_not_a_server_error(session_client):
    client = _answering(session_client(Role.VIEWER))
    with database_down():
        response = client.get("/")
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert response.content.decode().startswith("PostgreSQL (DATABASE_URL) is unreachable: ")


def test_healthz_names_the_database_and_beat(db):
    with database_down():
        response = Client().get("/healthz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["database"]["ok"] is False
    assert "OperationalError" in checks["database"]["error"]
    assert checks["redis"]["ok"] is True
    assert set(checks) == {"database", "redis", "celery_worker", "celery_beat"}
