"""The servers the product depends on: each checked for ``/healthz``, and a request that needs
one while it is down answered 503 with the reason instead of a server error."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from kombu.exceptions import OperationalError as BrokerError

from webapp.errors import ServiceError

RETRY_AFTER_S = 5
# What redis-py (and channels_redis, and Celery's broker) raise when Redis does not answer.
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, BrokerError)


class DependencyDown(ServiceError):
    """A server the request needs is unreachable; the message names it and the error."""

    status = 503


def redis_down(error: BaseException) -> DependencyDown:
    return DependencyDown(f"Redis (REDIS_URL) is unreachable: {error}; try again shortly")


class DependencyErrorsMiddleware:
    """A request that failed because Redis is down answers 503 with the reason and
    ``Retry-After``: never a server error."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, error: Exception) -> HttpResponse | None:
        if isinstance(error, DependencyDown):
            down = error
        elif isinstance(error, REDIS_DOWN):
            down = redis_down(error)
        else:
            return None
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
    else:
        checks["celery_worker"] = {"ok": False, "error": "unknown: its broker (Redis) is down"}
    return checks


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


def _redis() -> None:
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    with client:
        client.ping()


def _celery_worker() -> None:
    from webapp.celery import app

    if not app.control.ping(timeout=1.0, limit=1):
        raise RuntimeError("no Celery worker answered a ping within 1 s")
