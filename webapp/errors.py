"""The web application's root exception; views translate it to HTTP answers at the edge."""

from __future__ import annotations


class ServiceError(Exception):
    """A request the services refuse. `status` is the HTTP status it maps to; `problems` lists
    each problem as {"where": ..., "message": ...} so forms and API clients can show them all."""

    status = 400

    def __init__(self, message: str, *, problems: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [{"where": "request", "message": message}]


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


class Busy(ServiceError):
    """What the request needs is held by other work for longer than it waits; the message
    says to try again (the API adds ``Retry-After``)."""

    status = 503
