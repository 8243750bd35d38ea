"""The run page's operator drill-down: one operator's figures over time, as JSON for its
charts (see webapp/runs/drill.py)."""

from __future__ import annotations

from django.http import Http404, JsonResponse
from django.views.decorators.http import require_GET

from webapp.accounts.access import page_requires
from webapp.accounts.roles import Permission
from webapp.errors import NotFound
from webapp.pages.lookups import int_or_none, run_or_404
from webapp.runs.drill import operator_series


@page_requires(Permission.READ)
@require_GET
def run_operator_series(request, run_id: int, operator_id: str):
    """``?since_epoch=n``: only the epochs after n (how the open drill-down keeps up)."""
    run = run_or_404(run_id)
    try:
        series = operator_series(run=run, operator_id=operator_id,
                                 since_epoch=int_or_none(request.GET.get("since_epoch")))
    except NotFound as error:
        raise Http404(str(error)) from None
    return JsonResponse(series)
