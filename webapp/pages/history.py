"""The audit history across jobs: filters, each entry's plan diff and before/after figures, and
the same selection as CSV."""

from __future__ import annotations

import csv
from datetime import datetime

from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET

from webapp.accounts.access import page_requires
from webapp.accounts.roles import Permission
from webapp.audit.selectors import AuditFilter
from webapp.jobs.models import Job
from webapp.pages import selectors
from webapp.pages.lookups import int_or_none
from webapp.pages.views import _page_or_partial

# The figures before and after a change that are durations, shown as every page shows them.
FIGURE_DURATIONS = (("latency p50", "latency_p50_ms"), ("latency p99", "latency_p99_ms"),
                    ("batch duration", "batch_duration_ms"))


def history_filter(params) -> AuditFilter:
    action, outcome = params.get("action") or None, params.get("outcome") or None
    if action in selectors.SETTLED:
        # How a change ended is shown on its request's entry, not as an entry of its own:
        # "reconfiguration.applied" finds the changes that were applied.
        action, outcome = "reconfiguration.", outcome or action.split(".", 1)[1]
    return AuditFilter(
        job_id=int_or_none(params.get("job")),
        actor=params.get("actor") or None,
        action=action,
        since=_datetime_or_none(params.get("since")),
        until=_datetime_or_none(params.get("until")),
        outcome=outcome,
    )


@page_requires(Permission.READ)
@require_GET
def history(request):
    filters = history_filter(request.GET)
    page = max(1, int_or_none(request.GET.get("page")) or 1)
    size = selectors.HISTORY_PAGE
    # One more than a page tells whether an older page exists.
    entries = selectors.history_entries(filters=filters, limit=size + 1, offset=(page - 1) * size)
    params = request.GET.copy()
    params.pop("page", None)
    context = {
        "entries": entries[:size],
        "page": page,
        "older": page + 1 if len(entries) > size else None,
        "newer": page - 1 if page > 1 else None,
        "page_query": params.urlencode(),
        "jobs": Job.objects.order_by("name"),
        "choices": selectors.history_choices(),
        "filters": filters,
        "query": request.GET.urlencode(),
        "since": request.GET.get("since", ""),
        "until": request.GET.get("until", ""),
        "figure_durations": FIGURE_DURATIONS,
        "time_zone": timezone.get_current_timezone_name(),
        "nav": "history",
        "heading": "History",
    }
    return render(request, _page_or_partial(request, "history", "history-rows"), context)


@page_requires(Permission.READ)
@require_GET
def history_csv(request):
    entries = selectors.history_entries(filters=history_filter(request.GET), limit=100_000)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="streamscale-history.csv"'
    writer = csv.writer(response)
    writer.writerow(selectors.CSV_COLUMNS)
    writer.writerows([csv_safe(cell) for cell in row]
                     for row in selectors.history_csv_rows(entries))
    return response


def _datetime_or_none(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = parse_datetime(value)
    except ValueError:
        return None
    if parsed is not None and timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed)
    return parsed


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(cell):
    """A cell a spreadsheet will not run as a formula (OWASP CSV injection): text starting
    with = + - @, tab or CR gets a leading apostrophe. Numbers stay numbers."""
    if isinstance(cell, str) and cell.startswith(_FORMULA_STARTS):
        return "'" + cell
    return cell
