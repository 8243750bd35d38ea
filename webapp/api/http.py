"""JSON in and out for the API: the body parser with its limits, every error answered as
``{"error", "problems"}``, JSON 405s and 404s, and the path id converter."""

from __future__ import annotations

import json
from functools import wraps
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from ninja import Router
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.operation import PathView
from ninja.parser import Parser

from webapp.errors import ServiceError
from webapp.jobs.models import Trigger
from webapp.reconfigurations.requests import SUPPORTED as RECONFIGURATION_KINDS
from webapp.validation import problems_of, refusal

MAX_BODY_BYTES = 1_000_000
MAX_JSON_DEPTH = 32
# Far past any whole number the API takes (those fit in 64 bits), so that the fields' own
# bounds name an overflow; a longer one is refused here, before Python's limit (4,300
# digits) answers with its interpreter-specific advice.
MAX_INTEGER_DIGITS = 100
RETRY_AFTER_S = 5


class BadBody(ServiceError):
    pass


class BodyTooLarge(ServiceError):
    status = 413


class Forbidden(ServiceError):
    status = 403


class BoundedJsonParser(Parser):
    """The body as a JSON object, or BadBody naming what is wrong: at most MAX_BODY_BYTES,
    nested at most MAX_JSON_DEPTH deep, whole numbers of at most MAX_INTEGER_DIGITS digits,
    no NaN/Infinity, no NUL characters."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        return json_body(request)


def json_body(request: HttpRequest) -> dict[str, Any]:
    raw = _raw_body(request)
    depth = json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise BadBody(f"the body is nested {depth} deep, at most {MAX_JSON_DEPTH} is allowed")
    try:
        body = json.loads(raw or b"", parse_constant=_no_constant, parse_int=_bounded_int,
                          parse_float=_number)
    except IntegerTooLong as error:
        raise BadBody(str(error)) from None
    except ValueError as error:
        raise BadBody(f"the body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise BadBody("the body must be a JSON object")
    if _has_nul(body):
        raise BadBody("the body contains a NUL character")
    return body


def _raw_body(request: HttpRequest) -> bytes:
    if _declared_length(request) > MAX_BODY_BYTES:
        raise too_large(request)
    try:
        raw = request.body
    except RequestDataTooBig:
        raise too_large(request) from None
    if len(raw) > MAX_BODY_BYTES:
        raise BodyTooLarge(f"the body is over {MAX_BODY_BYTES} bytes")
    return raw


def _declared_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def too_large(request: HttpRequest) -> BodyTooLarge:
    length = _declared_length(request)
    if length > MAX_BODY_BYTES:
        return BodyTooLarge(f"the body is {length} bytes, at most {MAX_BODY_BYTES} are allowed")
    return BodyTooLarge(f"the body is over {MAX_BODY_BYTES} bytes")


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


class IntegerTooLong(ValueError):
    pass


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INTEGER_DIGITS:
        raise IntegerTooLong(f"the body has a whole number of {digits} digits: at most "
                             f"{MAX_INTEGER_DIGITS} are allowed")
    return int(text)


def _number(text: str) -> int | float:
    """A number written with a fraction or exponent; a whole one (``5.0``, ``1e3``) within
    64 bits is taken as the whole number it is, as JSON Schema's ``integer`` allows, so that
    a field of whole numbers takes it (their models refuse ``"5"``, and ``5.5`` still)."""
    value = float(text)
    if value.is_integer() and abs(value) < 2**63:
        return int(value)
    return value


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


def trigger_of(request: HttpRequest) -> str:
    return Trigger.API_TOKEN if getattr(request, "auth_via_token", False) else Trigger.USER


# --- errors ---


def error_answer(error: ServiceError) -> JsonResponse:
    response = JsonResponse({"error": str(error), "problems": error.problems},
                            status=error.status)
    if error.status in (429, 503):
        response["Retry-After"] = str(RETRY_AFTER_S)
    return response


def _message_answer(message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message, "problems": [{"where": "request", "message": message}]},
                        status=status)


def service_error(request: HttpRequest, error: ServiceError) -> JsonResponse:
    return error_answer(error)


def validation_error(request: HttpRequest, error: ValidationError) -> JsonResponse:
    """Ninja's validation errors (422 by default) answered as the API always did: 400 with
    one problem per field."""
    return error_answer(refusal(problems_of(error.errors, tags=RECONFIGURATION_KINDS)))


def http_error(request: HttpRequest, error: HttpError) -> JsonResponse:
    if isinstance(error, AuthenticationError):
        response = _message_answer("authentication required", 401)
        response["WWW-Authenticate"] = "Bearer"  # RFC 9110: a 401 names the scheme to use
        return response
    if isinstance(error.__cause__, ServiceError):  # the body parser's refusal, as raised
        return error_answer(error.__cause__)
    return _message_answer(str(error), error.status_code)


def body_too_large(request: HttpRequest, error: RequestDataTooBig) -> JsonResponse:
    return error_answer(too_large(request))


def unexpected_error(request: HttpRequest, error: Exception):
    """Left to Django's handlers and middleware (a Redis outage is a 503 there), as for any
    view: never a traceback in an answer."""
    raise error


EXCEPTION_HANDLERS = [
    (ServiceError, service_error), (ValidationError, validation_error),
    (HttpError, http_error), (RequestDataTooBig, body_too_large), (Exception, unexpected_error),
]


# --- methods and paths ---


def method_not_allowed(allowed: list[str]) -> JsonResponse:
    response = _message_answer(f"use {' or '.join(allowed)}", 405)
    response["Allow"] = ", ".join(allowed)
    return response


def only_get(view):
    """A plain view (the OpenAPI document's) that answers GET and HEAD, others a JSON 405."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        if request.method not in ("GET", "HEAD"):
            return method_not_allowed(["GET", "HEAD"])
        return view(request, *args, **kwargs)

    return wrapper


class JsonPathView(PathView):
    """One path's operations: HEAD answered as GET, and any other method a JSON 405 with
    Allow (TRACE included)."""

    def _find_operation(self, request: HttpRequest):
        method = "GET" if request.method == "HEAD" else request.method
        return next((op for op in self.operations if method in op.methods), None)

    def _not_allowed(self) -> JsonResponse:
        allowed = [m for op in self.operations for m in op.methods]
        if "GET" in allowed:
            allowed.insert(allowed.index("GET") + 1, "HEAD")
        return method_not_allowed(allowed)

    def clone(self) -> JsonPathView:
        cloned = JsonPathView()
        cloned.is_async, cloned.url_name = self.is_async, self.url_name
        cloned.operations = [op.clone() for op in self.operations]
        return cloned


class ApiRouter(Router):
    """A ninja Router whose paths answer wrong methods as the API does (JsonPathView)."""

    def add_api_operation(self, path: str, methods: list[str], view_func, **kwargs) -> None:
        self.path_operations.setdefault(path, JsonPathView())
        super().add_api_operation(path, methods, view_func, **kwargs)


def not_found(request, *args, **kwargs) -> JsonResponse:
    """Every unknown /api/ path: a JSON 404."""
    return _message_answer(f"there is no API endpoint {request.path!r}", 404)


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
        return _message_answer(f"CSRF check failed ({reason}): send the X-CSRFToken header, or "
                               "use a Bearer token", 403)
    from django.views.csrf import csrf_failure as default

    return default(request, reason=reason)
