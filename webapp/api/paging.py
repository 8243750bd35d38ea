"""Pages of list answers: `?page=N` (from 1) and `?page_size=M` (1..MAX_PAGE_SIZE).

Every list endpoint answers one page and says how to get the next one, so no answer grows with
the age of a run or a job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from ninja import Schema
from pydantic import Field

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
MAX_PAGE = (2**63 - 1) // MAX_PAGE_SIZE  # so that the row offset fits PostgreSQL's bigint


class PageQuery(Schema):
    page: int = Field(1, ge=1, le=MAX_PAGE, description="from 1")
    page_size: int = Field(DEFAULT_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE)


def page_of(rows: QuerySet, as_json: Callable[[Any], dict], query: PageQuery, *,
            items: str) -> dict:
    """One page of an ordered queryset: {items: [...], "page": {number, size, next}}, the rows
    under the name ``items``; next is null on the last page."""
    number, size = query.page, query.page_size
    start = (number - 1) * size
    found = list(rows[start:start + size + 1])
    has_next = len(found) > size
    return {
        items: [as_json(row) for row in found[:size]],
        "page": {"number": number, "size": size, "next": number + 1 if has_next else None},
    }
