"""Pydantic's validation errors as the web app's problems: each names the field it is about and
says what is wrong in words, e.g. ``{"where": "field parallelism", "message": "must be at
least 1"}``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pydantic

from webapp.errors import ServiceError

# Where a request's part is read from, as ninja names it in an error's location.
_SOURCES = {"body": "field", "query": "query parameter", "path": "path parameter"}
_TYPE_WORDS = {
    "int_type": "must be a whole number", "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number", "float_type": "must be a number",
    "float_parsing": "must be a number", "string_type": "must be a string",
    "bool_type": "must be true or false", "bool_parsing": "must be true or false",
    "dict_type": "must be an object", "model_type": "must be an object",
    "model_attributes_type": "must be an object", "list_type": "must be a list",
    "missing": "is required", "union_tag_not_found": "is required",
    "extra_forbidden": "is not a known field", "none_required": "must be null",
}


def problems_of(errors: Iterable[dict[str, Any]], *, tags: Sequence[str] = ()) -> list[dict]:
    """One problem per error. An error's location starts with its source (``body``, ``query``,
    ``path``) when ninja reports it; ``tags`` are the values of discriminated unions' tags,
    which pydantic puts in a location but are not fields."""
    return [_problem(error, tags) for error in errors]


def refusal(problems: list[dict[str, str]]) -> ServiceError:
    """A ServiceError (400) whose message lists every problem."""
    return ServiceError("; ".join(_sentence(p) for p in problems), problems=problems)


def _sentence(problem: dict[str, str]) -> str:
    where, message = problem["where"], problem["message"]
    if where != "body":
        return f"{where} {message}"
    return f"the body {message}" if message.startswith(("must ", "is ")) else message


def refusal_of(error: pydantic.ValidationError, *, tags: Sequence[str] = ()) -> ServiceError:
    return refusal(problems_of(error.errors(include_url=False), tags=tags))


def _problem(error: dict[str, Any], tags: Sequence[str]) -> dict[str, str]:
    loc = list(error.get("loc", ()))
    kind = "field"
    if loc and loc[0] in _SOURCES:
        kind = _SOURCES[loc.pop(0)]
        if kind == "field" and loc:
            loc.pop(0)  # the view's parameter that holds the whole body
    loc = [part for part in loc if part not in tags]
    if error["type"].startswith("union_tag"):
        loc.append(error.get("ctx", {}).get("discriminator", "").strip("'"))
    path = _path(loc)
    if not path:
        return {"where": "body", "message": _body_message(error)}
    return {"where": f"{kind} {path}", "message": _message(error)}


def _path(loc: list[Any]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part != "":
            text += f".{part}" if text else str(part)
    return text


def _body_message(error: dict[str, Any]) -> str:
    if error["type"] == "missing":
        return "is required: send a JSON object"  # an empty body
    return _message(error)


def _message(error: dict[str, Any]) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in _TYPE_WORDS:
        return _TYPE_WORDS[kind]
    bounds = {
        "greater_than_equal": lambda: f"must be at least {ctx.get('ge')}",
        "greater_than": lambda: f"must be above {ctx.get('gt')}",
        "less_than_equal": lambda: f"must be at most {ctx.get('le')}",
        "less_than": lambda: f"must be below {ctx.get('lt')}",
        "string_too_long": lambda: f"must be at most {ctx.get('max_length')} characters",
        "string_too_short": lambda: f"must be at least {ctx.get('min_length')} characters",
        "too_long": lambda: f"must have at most {ctx.get('max_length')} items",
        "too_short": lambda: f"must have at least {ctx.get('min_length')} items",
        "literal_error": lambda: f"must be one of {ctx.get('expected')}",
        "enum": lambda: f"must be one of {ctx.get('expected')}",
        "union_tag_invalid": lambda: f"must be one of {ctx.get('expected_tags')}",
        "string_pattern_mismatch": lambda: f"must match {ctx.get('pattern')}",
    }
    if kind in bounds:
        return bounds[kind]()
    message = str(error.get("msg", "is not valid"))
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    return message[:1].lower() + message[1:]
