"""JSON in and out for the API views, and the translation of service errors to answers."""

from __future__ import annotations

import json
from functools import wraps
from typing import Any

from django.http import HttpRequest, JsonResponse

from webapp.errors import ServiceError
from webapp.jobs.models import Trigger


class BadBody(ServiceError):
    pass


def json_body(request: HttpRequest) -> dict[str, Any]:
    """The request body as a JSON object, or BadBody naming what is wrong."""
    try:
        body = json.loads(request.body or b"")
    except ValueError as error:
        raise BadBody(f"the body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise BadBody("the body must be a JSON object")
    return body


def field(body: dict[str, Any], name: str, kind: type, *, required: bool = True, default=None):
    """One field of a body, checked for presence and type; the error names the field."""
    if name not in body:
        if required:
            raise BadBody(f"field {name!r} is required", problems=[_p(name, "is required")])
        return default
    value = body[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadBody(
            f"field {name!r} must be {kind.__name__}",
            problems=[_p(name, f"must be {kind.__name__}")],
        )
    return value


def _p(name: str, message: str) -> dict[str, str]:
    return {"where": f"field {name}", "message": message}


def trigger_of(request: HttpRequest) -> str:
    return Trigger.API_TOKEN if getattr(request, "auth_via_token", False) else Trigger.USER


def service_errors(view):
    """Answer a ServiceError with its status, message and problems."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except ServiceError as error:
            return JsonResponse(
                {"error": str(error), "problems": error.problems}, status=error.status
            )

    return wrapper


def method_not_allowed(allowed: list[str]) -> JsonResponse:
    response = JsonResponse({"error": f"use {' or '.join(allowed)}"}, status=405)
    response["Allow"] = ", ".join(allowed)
    return response


def csrf_failure(request, reason: str = ""):
    """CSRF refusals as JSON for the API (a session-authenticated write without the token)."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"error": f"CSRF check failed ({reason}): send the X-CSRFToken header, or use a "
                      "Bearer token"}, status=403)
    from django.views.csrf import csrf_failure as default

    return default(request, reason=reason)
