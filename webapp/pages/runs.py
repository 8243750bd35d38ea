"""The run page and its controls: live view shell, chart history, scaling with a preview, the
reconfiguration list, the autoscaler, start and stop. Controls post forms (htmx) and get back
the fragment they replace; every write goes through the same service as the API."""

from __future__ import annotations

import uuid

from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from webapp.accounts.access import page_requires
from webapp.accounts.roles import Permission
from webapp.autoscaling.services import autoscale_configure
from webapp.errors import NotFound, ServiceError
from webapp.jobs import selectors as job_selectors
from webapp.jobs.models import Trigger
from webapp.pages import selectors
from webapp.pages.forms import autoscale_body, reconfiguration_body
from webapp.pages.lookups import run_or_404
from webapp.pages.run_changes import (
    preview_or_refusal,
    reconfiguration_outcome,
    run_change_panels,
)
from webapp.reconfigurations import selectors as reconfiguration_selectors
from webapp.reconfigurations.requests import MAX_REASON
from webapp.reconfigurations.services import RECONFIGURABLE
from webapp.runs import inspection
from webapp.runs.restarts import restart_policy_of_run
from webapp.runs.resumes import run_resume, run_state_discard
from webapp.runs.selectors import run_activity_of, run_kept_state
from webapp.runs.services import FINAL_STATUSES, MAX_STOP_REASON, run_start, run_stop


def _run_context(run) -> dict:
    """What every fragment of the run page decides its controls from: a run that has ended
    (or is ending) offers no control the server would refuse."""
    return {"run": run, "live": run.status in RECONFIGURABLE}


@page_requires(Permission.READ)
@require_GET
def run_detail(request, run_id: int):
    run = run_or_404(run_id)
    can_operate = request.user.can(Permission.OPERATE_RUNS)
    incidents = _incidents(run)
    context = {
        **_run_context(run),
        **incidents,
        **_views_context(run, "overview", incidents),
        "config": selectors.run_page_config(run=run, can_operate=can_operate),
        "reconfigurations": selectors.run_reconfigurations(run=run),
        "bounds": selectors.policy_bounds(run=run),
        "request_id": uuid.uuid4().hex,
        "reason_max": MAX_REASON,
        "stop_reason_max": MAX_STOP_REASON,
        "plan_version": reconfiguration_selectors.run_plan_version(run=run),
        "restart_strategy": restart_policy_of_run(run).describe(),
        "activity": run_activity_of(run=run),
        **_state_context(run),
    }
    if can_operate and context["live"]:
        context["changes"] = run_change_panels(run=run)
    return render(request, "pages/run_detail.html", context)


def _incidents(run) -> dict:
    return {"failure": selectors.run_failure(run=run),
            "restarts": selectors.run_restarts(run=run)}


def _views_context(run, view: str, incidents: dict) -> dict:
    """What the run's views share: the run, its job, the tabs between the views (one per
    keyed operator's instances) and how many failures and restarts the run had."""
    return {"run": run, "job": run.job, "nav": "jobs", "view": view,
            "keyed": inspection.run_keyed_operators(run=run),
            "exception_count": len(incidents["restarts"]) + (1 if incidents["failure"] else 0)}


@page_requires(Permission.READ)
@require_GET
def run_epochs(request, run_id: int):
    """The run's epochs, newest first, a page at a time (``?before=<epoch>``)."""
    run = run_or_404(run_id)
    before = request.GET.get("before", "")
    page = inspection.run_epochs_page(run=run, before=int(before) if before.isdigit() else None)
    return render(request, "pages/run_epochs.html",
                  {**_views_context(run, "epochs", _incidents(run)), "page": page})


@page_requires(Permission.READ)
@require_GET
def run_instances(request, run_id: int, operator_id: str):
    """The instances of one keyed operator over its recent epochs."""
    run = run_or_404(run_id)
    try:
        found = inspection.operator_instances(run=run, operator_id=operator_id)
    except NotFound as error:
        raise Http404(str(error)) from None
    return render(request, "pages/run_instances.html", {
        **_views_context(run, f"instances:{operator_id}", _incidents(run)), "found": found})


@page_requires(Permission.READ)
@require_GET
def run_exceptions(request, run_id: int):
    """The run's failure and restarts (each cause in one line, the driver's last output behind
    a disclosure) and the changes the engine refused or that failed."""
    run = run_or_404(run_id)
    incidents = _incidents(run)
    return render(request, "pages/run_exceptions.html", {
        **_run_context(run), **incidents, **_views_context(run, "exceptions", incidents),
        "refused": inspection.run_refused_changes(run=run)})


@page_requires(Permission.READ)
@require_GET
def run_incidents(request, run_id: int):
    run = run_or_404(run_id)
    return render(request, "pages/partials/run-incidents.html",
                  {**_run_context(run), **_incidents(run)})


@page_requires(Permission.READ)
@require_GET
def run_series(request, run_id: int):
    return JsonResponse(selectors.run_series(run=run_or_404(run_id)))


@page_requires(Permission.READ)
@require_GET
def run_reconfiguration_list(request, run_id: int):
    run = run_or_404(run_id)
    # The heading's "plan of vN" comes along (out of band): a move to a version changes it.
    context = {**_run_context(run), "reconfigurations": selectors.run_reconfigurations(run=run),
               "plan_version": reconfiguration_selectors.run_plan_version(run=run), "oob": True}
    return render(request, "pages/partials/reconfigurations.html", context)


@page_requires(Permission.READ)
@require_GET
def run_autoscale_panel(request, run_id: int):
    return render(request, "pages/partials/autoscale.html", _run_context(run_or_404(run_id)))


@page_requires(Permission.OPERATE_RUNS)
@require_POST
def scale_preview(request, run_id: int):
    body = reconfiguration_body(request.POST)
    body.setdefault("reason", "preview")
    context = preview_or_refusal({"body": body}, run_id=run_id, body=body)
    if "preview" in context:
        context["rows"], context["unchanged"] = selectors.preview_rows(context["preview"])
    return render(request, "pages/partials/scale-preview.html", context)


@page_requires(Permission.OPERATE_RUNS)
@require_POST
def reconfigure(request, run_id: int):
    """Request a reconfiguration from a form of the run page (a rescale, the policy's scale
    out or in, a rollback, a rebalance, a move to a newer version)."""
    return reconfiguration_outcome(request, run_id, reconfiguration_body(request.POST))


@page_requires(Permission.OPERATE_RUNS)
@require_POST
def autoscale(request, run_id: int):
    """Set the autoscaler's mode and bounds; the panel comes back with what is stored, or
    with the refusal's message and the form keeping what was typed."""
    context = {}
    try:
        run = autoscale_configure(run_id=run_id, body=autoscale_body(request.POST),
                                  actor=request.user, trigger=Trigger.USER)
    except NotFound as error:
        raise Http404(str(error)) from None
    except ServiceError as error:
        run, context["error"], context["typed"] = run_or_404(run_id), error, request.POST
    return render(request, "pages/partials/autoscale.html", {**context, **_run_context(run)})


@page_requires(Permission.OPERATE_RUNS)
@require_POST
def stop(request, run_id: int):
    """Stop a run with a reason; htmx gets the dialog's outcome, a plain form the run page."""
    htmx = bool(request.headers.get("HX-Request"))
    try:
        run = run_stop(run_id=run_id, actor=request.user, trigger=Trigger.USER,
                       reason=request.POST.get("reason", "").strip())
    except NotFound as error:
        raise Http404(str(error)) from None
    except ServiceError as error:
        if htmx:  # refused (no reason, too long, already ended): said in the dialog
            return render(request, "pages/partials/stop-outcome.html", {"error": error})
        return redirect("run-detail", run_id=run_id)
    if htmx:
        return render(request, "pages/partials/stop-outcome.html", {"run": run})
    return redirect("run-detail", run_id=run_id)


def _state_context(run) -> dict:
    """The kept state of a stopped or failed run and the versions it may resume on."""
    kept = run_kept_state(run=run)
    if kept is None:
        return {}
    versions = list(run.job.versions.order_by("-number").values_list("number", flat=True))
    return {"kept": kept, "versions": versions}


def _state_panel(request, run_id: int, action) -> HttpResponse:  # noqa: ANN001
    """Resume or discard from the kept-state panel: a resumed run's page is reloaded (it is
    live again); a refusal or a discard comes back in the panel."""
    try:
        run = action()
    except NotFound as error:
        raise Http404(str(error)) from None
    except ServiceError as error:
        run = run_or_404(run_id)
        return render(request, "pages/partials/run-state.html",
                      {"run": run, "error": error, **_state_context(run)})
    if run.status in FINAL_STATUSES:
        return render(request, "pages/partials/run-state.html",
                      {"run": run, **_state_context(run)})
    if request.headers.get("HX-Request"):
        answer = render(request, "pages/partials/run-state.html", {"run": run, "resumed": True})
        answer["HX-Redirect"] = reverse("run-detail", args=[run.pk])
        return answer
    return redirect("run-detail", run_id=run.pk)


@page_requires(Permission.OPERATE_RUNS)
@require_POST
def resume(request, run_id: int):
    """Resume a stopped or failed run from its kept state, on the version chosen."""
    version = request.POST.get("version", "").strip()
    return _state_panel(request, run_id, lambda: run_resume(
        run_id=run_id, actor=request.user, trigger=Trigger.USER,
        version=int(version) if version.isdigit() else None))


@page_requires(Permission.OPERATE_RUNS)
@require_POST
def state_discard(request, run_id: int):
    """Discard a stopped or failed run's kept state."""
    return _state_panel(request, run_id, lambda: run_state_discard(
        run_id=run_id, actor=request.user, trigger=Trigger.USER))


@page_requires(Permission.OPERATE_RUNS)
@require_POST
def start(request, job_id: int):
    version = request.POST.get("version", "").strip()
    try:
        run = run_start(job_id=job_id, version=int(version) if version.isdigit() else None,
                        actor=request.user, trigger=Trigger.USER)
    except NotFound as error:
        raise Http404(str(error)) from None
    except ServiceError as error:
        job = job_selectors.job_get(job_id=job_id)
        active = job_selectors.job_current_run(job=job)
        if active is not None:
            return redirect("run-detail", run_id=active.pk)
        return render(request, "pages/error.html", {"error": error}, status=error.status)
    return redirect("run-detail", run_id=run.pk)
