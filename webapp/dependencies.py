"""The servers the product depends on: each checked for ``/healthz``, and a request that needs
one while it is down answered 503 with the reason instead of a server error."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg2
import redis
from django.conf import settings
from django.db import connection
from django.db.utils import InterfaceError as DjangoInterfaceError
from django.db.utils import OperationalError as DjangoOperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import server_error
from kombu.exceptions import OperationalError as BrokerError
from redis.backoff import NoBackoff
from redis.retry import Retry

from webapp.errors import ServiceError

RETRY_AFTER_S = 5
# What redis-py (and channels_redis, and Celery's broker) raise when Redis does not answer.
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, BrokerError)
# What Django and psycopg2 raise when PostgreSQL does not answer or dropped the connection (a
# restart); a query's own errors (ProgrammingError, IntegrityError) are not among them.
DATABASE_DOWN = (DjangoOperationalError, DjangoInterfaceError, psycopg2.OperationalError,
                 psycopg2.InterfaceError)
BEAT_KEY = "streamscale:beat:last"
# The beat sends runs_watch every RUNS_WATCH_S; this many seconds without one means beat (or
# the worker that runs it) is not doing its job.
BEAT_SILENT_AFTER_S = 30.0


class DependencyDown(ServiceError):
    """A server the request needs is unreachable; the message names it and the error."""

    status = 503


def redis_down(error: BaseException) -> DependencyDown:
    return DependencyDown(f"Redis (REDIS_URL) is unreachable: {error}; try again shortly")


def database_down(error: BaseException) -> DependencyDown:
    detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return DependencyDown(f"PostgreSQL (DATABASE_URL) is unreachable: {detail}; not retried "
                          "by the server, try again shortly")


def dependency_down_of(error: BaseException | None) -> DependencyDown | None:
    """The 503 an error stands for when a server the request needs is down, else None."""
    if isinstance(error, DependencyDown):
        return error
    if isinstance(error, REDIS_DOWN):
        return redis_down(error)
    if isinstance(error, DATABASE_DOWN):
        return database_down(error)
    return None


class DependencyErrorsMiddleware:
    """A view that failed because Redis or PostgreSQL is down answers 503 with the reason and
    ``Retry-After``: never a server error. (Middleware that fails so, such as the bearer
    token's lookup, is answered by ``server_error_or_dependency_down``.)"""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, error: Exception) -> HttpResponse | None:
        down = dependency_down_of(error)
        return None if down is None else dependency_answer(request, down)


def server_error_or_dependency_down(request: HttpRequest) -> HttpResponse:
    """Django's handler500: it runs for errors raised anywhere, middleware included (where
    ``process_exception`` never sees them), while the error is being handled; a server that
    is down is a 503 there too, anything else the plain 500 page."""
    down = dependency_down_of(sys.exc_info()[1])
    if down is None:
        return server_error(request)
    return dependency_answer(request, down)


def dependency_answer(request: HttpRequest, down: DependencyDown) -> HttpResponse:
    """503 with ``Retry-After``: the API's JSON shape under /api/, plain text elsewhere (the
    pages' templates may need the database that is down)."""
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse(
            {"error": str(down), "problems": down.problems}, status=503)
    else:
        response = HttpResponse(str(down), status=503, content_type="text/plain")
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


def dependency_checks() -> dict[str, dict[str, Any]]:
    """Each dependency: ``{"ok": bool, "ms": time taken, "error": why not ok}``."""
    checks = {"database": _timed(_database), "redis": _timed(_redis)}
    if checks["redis"]["ok"]:
        checks["celery_worker"] = _timed(_celery_worker)
        checks["celery_beat"] = _timed(_celery_beat)
    else:
        unknown = {"ok": False, "error": "unknown: its broker (Redis) is down"}
        checks["celery_worker"], checks["celery_beat"] = unknown, dict(unknown)
    return checks


def beat_tick_record() -> None:
    """Called by the task beat sends every ``RUNS_WATCH_S``: the moment ``/healthz`` judges
    beat by."""
    client = _redis_client()
    with client:
        client.set(BEAT_KEY, repr(time.time()), ex=int(BEAT_SILENT_AFTER_S * 10))


def _timed(check: Callable[[], None]) -> dict[str, Any]:
    started = time.monotonic()
    try:
        check()
    except Exception as error:  # noqa: BLE001 - every failure is a report, not a crash
        return {"ok": False, "ms": _ms(started), "error": f"{type(error).__name__}: {error}"}
    return {"ok": True, "ms": _ms(started)}


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000.0, 1)


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _redis_client() -> redis.Redis:
    # A check answers within its timeout: redis-py's default retries would make a Redis that
    # is down take seconds to report.
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1,
                                retry=Retry(NoBackoff(), 0))


def _redis() -> None:
    client = _redis_client()
    with client:
        client.ping()


def _celery_beat() -> None:
    client = _redis_client()
    with client:
        raw = client.get(BEAT_KEY)
    if raw is None:
        raise RuntimeError("no task sent by Celery beat has run yet (is beat running?)")
    silent = time.time() - float(raw)
    if silent > BEAT_SILENT_AFTER_S:
        raise RuntimeError(f"the last task sent by Celery beat ran {silent:.0f} s ago; beat "
                           f"sends one every {settings.RUNS_WATCH_S:g} s (is beat running?)")


def _celery_worker() -> None:
    from webapp.celery import app

    if not app.control.ping(timeout=1.0, limit=1):
        raise RuntimeError("no Celery worker answered a ping within 1 s")
