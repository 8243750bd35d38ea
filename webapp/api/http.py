"""JSON in and out for the API views, and the translation of service errors to answers."""

from __future__ import annotations

import json
from functools import wraps
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse

from webapp.errors import ServiceError
from webapp.jobs.models import Trigger

MAX_BODY_BYTES = 1_000_000
MAX_JSON_DEPTH = 32
MAX_STRING = 1000
MAX_INT = 2**63 - 1


class BadBody(ServiceError):
    pass


class BodyTooLarge(ServiceError):
    status = 413


def json_body(request: HttpRequest) -> dict[str, Any]:
    """The request body as a JSON object, or BadBody naming what is wrong: at most
    MAX_BODY_BYTES, nested at most MAX_JSON_DEPTH deep, no NaN/Infinity, no NUL characters."""
    raw = _raw_body(request)
    depth = json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise BadBody(f"the body is nested {depth} deep, at most {MAX_JSON_DEPTH} is allowed")
    try:
        body = json.loads(raw or b"", parse_constant=_no_constant)
    except ValueError as error:
        raise BadBody(f"the body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise BadBody("the body must be a JSON object")
    if _has_nul(body):
        raise BadBody("the body contains a NUL character")
    return body


def _raw_body(request: HttpRequest) -> bytes:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > MAX_BODY_BYTES:
        raise BodyTooLarge(f"the body is {length} bytes, at most {MAX_BODY_BYTES} are allowed")
    try:
        raw = request.body
    except RequestDataTooBig:
        raise BodyTooLarge(f"the body is over {MAX_BODY_BYTES} bytes") from None
    if len(raw) > MAX_BODY_BYTES:
        raise BodyTooLarge(f"the body is over {MAX_BODY_BYTES} bytes")
    return raw


def json_depth(raw: bytes) -> int:
    """How deep arrays and objects nest in a JSON text (linear scan, strings skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def field(body: dict[str, Any], name: str, kind: type, *, required: bool = True, default=None,
          max_length: int = MAX_STRING):
    """One field of a body, checked for presence, type and size; the error names the field."""
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
    if kind is str and len(value) > max_length:
        message = f"must be at most {max_length} characters"
        raise BadBody(f"field {name!r} {message}", problems=[_p(name, message)])
    if kind is int and not 0 <= value <= MAX_INT:
        message = f"must be from 0 to {MAX_INT}"
        raise BadBody(f"field {name!r} {message}", problems=[_p(name, message)])
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
            response = JsonResponse(
                {"error": str(error), "problems": error.problems}, status=error.status
            )
            if error.status == 503:
                response["Retry-After"] = "5"
            return response

    return wrapper


def method_not_allowed(allowed: list[str]) -> JsonResponse:
    response = JsonResponse({"error": f"use {' or '.join(allowed)}"}, status=405)
    response["Allow"] = ", ".join(allowed)
    return response


def allow(*methods: str):
    """Answer 405 (JSON, with Allow) to any other method, TRACE included; GET allows HEAD."""
    allowed = [*methods, "HEAD"] if "GET" in methods and "HEAD" not in methods else list(methods)

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if request.method not in allowed:
                return method_not_allowed(allowed)
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def not_found(request, *args, **kwargs) -> JsonResponse:
    """Every unknown /api/ path: a JSON 404."""
    return JsonResponse({"error": f"there is no API endpoint {request.path!r}"}, status=404)


class ApiIdConverter:
    """Path ids bounded to PostgreSQL's bigint, so a huge id is a 404, not a database error."""

    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


def csrf_failure(request, reason: str = ""):
    """CSRF refusals as JSON for the API (a session-authenticated write without the token)."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"error": f"CSRF check failed ({reason}): send the X-CSRFToken header, or use a "
                      "Bearer token"}, status=403)
    from django.views.csrf import csrf_failure as default

    return default(request, reason=reason)
