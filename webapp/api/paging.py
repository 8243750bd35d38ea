"""Pages of list answers: `?page=N` (from 1) and `?page_size=M` (1..MAX_PAGE_SIZE).

Every list endpoint answers one page and says how to get the next one, so no answer grows with
the age of a run or a job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest

from webapp.api.http import BadBody

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def query_int(request: HttpRequest, name: str, *, default: int, low: int, high: int) -> int:
    """A whole-number query parameter within [low, high]; BadBody names it otherwise."""
    raw = request.GET.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        limit = f"from {low} to {high}" if high < 2**62 else f"at least {low}"
        raise BadBody(f"{name} must be a whole number {limit}, not {raw!r}",
                      problems=[{"where": name, "message": f"must be a whole number {limit}"}])
    return value


def page_of(request: HttpRequest, rows: QuerySet, as_json: Callable[[Any], dict]) -> dict:
    """One page of an ordered queryset: {"items": [...], "page": {number, size, next}}."""
    number = query_int(request, "page", default=1, low=1, high=2**63)
    size = query_int(request, "page_size", default=DEFAULT_PAGE_SIZE, low=1, high=MAX_PAGE_SIZE)
    start = (number - 1) * size
    found = list(rows[start:start + size + 1])
    has_next = len(found) > size
    return {
        "items": [as_json(row) for row in found[:size]],
        "page": {"number": number, "size": size, "next": number + 1 if has_next else None},
    }
