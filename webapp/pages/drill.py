"""The run page's operator drill-down: one operator's figures over time, as JSON for its
charts (see webapp/runs/drill.py), and a preview of the rows it emits
(webapp/samples/services.py)."""

from __future__ import annotations

from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from webapp.accounts.access import page_requires
from webapp.accounts.roles import Permission
from webapp.errors import NotFound, ServiceError
from webapp.pages.lookups import int_or_none, run_or_404
from webapp.runs.drill import operator_series
from webapp.samples.services import operator_sample_get, operator_sample_request, sample_as_json


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


@page_requires(Permission.OPERATE_RUNS)
@require_POST
def run_sample_request(request, run_id: int):
    """Preview data: asks the run's driver for rows of the operator posted; the answer's
    fragment asks again until the rows come."""
    try:
        sample = operator_sample_request(run_id=run_id, actor=request.user,
                                         operator=request.POST.get("operator", "").strip())
    except NotFound as error:
        raise Http404(str(error)) from None
    except ServiceError as error:
        return render(request, "pages/partials/operator-sample.html", {"error": error})
    return _sample_answer(request, sample)


@page_requires(Permission.OPERATE_RUNS)
@require_GET
def run_sample(request, run_id: int, sample_id: int):
    try:
        sample = operator_sample_get(run_id=run_id, sample_id=sample_id)
    except NotFound as error:
        raise Http404(str(error)) from None
    return _sample_answer(request, sample)


def _sample_answer(request, sample):
    return render(request, "pages/partials/operator-sample.html",
                  {"sample": sample_as_json(sample)})
