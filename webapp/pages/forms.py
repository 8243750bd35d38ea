"""Form posts turned into the request bodies the services take, so pages and the API share one
set of rules (the services check every field and name the one that is wrong)."""

from __future__ import annotations

from typing import Any

from django.http import QueryDict

WHOLE_NUMBER_FIELDS = ("parallelism", "instances", "to_reconfiguration", "to_version")
TEXT_FIELDS = ("kind", "operator", "reason", "request_id")


def reconfiguration_body(data: QueryDict) -> dict[str, Any]:
    """A reconfiguration request from a form: numbers as numbers, blanks left out."""
    body: dict[str, Any] = {}
    for name in TEXT_FIELDS:
        value = data.get(name, "").strip()
        if value:
            body[name] = value
    for name in WHOLE_NUMBER_FIELDS:
        value = data.get(name, "").strip()
        if value:
            body[name] = _whole_number(value)
    if body.get("kind") == "rebalance":
        body.setdefault("assignment", "weighted")
    return body


def autoscale_body(data: QueryDict) -> dict[str, Any]:
    """The autoscaler's settings from its form; a bound the form leaves out stays as it is,
    an emptied ``max`` means no bound but the job's key groups."""
    body: dict[str, Any] = {"mode": data.get("mode", "")}
    for name in ("min", "max", "cooldown_s"):
        value = data.get(name, "").strip()
        if value:
            body[name] = _whole_number(value)
        elif name == "max" and name in data:
            body[name] = None
        elif name in data:
            body[name] = ""  # an emptied required bound: the service names it
    return body


def _whole_number(value: str) -> int | str:
    # A non-number stays text so the service's message names the field.
    try:
        return int(value)
    except ValueError:
        return value
