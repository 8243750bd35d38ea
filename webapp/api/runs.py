"""API views for runs, reconfigurations, metrics and autoscaling."""

from __future__ import annotations

from django.http import JsonResponse

from webapp.accounts.access import api_requires
from webapp.accounts.roles import Permission
from webapp.api.http import (
    allow,
    field,
    json_body,
    method_not_allowed,
    service_errors,
    trigger_of,
)
from webapp.api.paging import MAX_PAGE_SIZE, page_of, query_int
from webapp.autoscaling.services import autoscale_configure
from webapp.reconfigurations.services import reconfiguration_preview, reconfiguration_request
from webapp.runs import selectors
from webapp.runs.services import run_start, run_stop


@service_errors
def job_runs(request, job_id: int):
    if request.method == "POST":
        return _run_start(request, job_id)
    if request.method == "GET":
        return _run_list(request, job_id)
    return method_not_allowed(["GET", "POST"])


@api_requires(Permission.READ)
@service_errors
def _run_list(request, job_id: int):
    page = page_of(request, selectors.job_runs(job_id=job_id), selectors.run_summary_as_json)
    return JsonResponse({"job": job_id, "runs": page["items"], "page": page["page"]})


@api_requires(Permission.OPERATE_RUNS)
@service_errors
def _run_start(request, job_id: int):
    body = json_body(request) if request.body else {}
    run = run_start(
        job_id=job_id,
        version=field(body, "version", int, required=False),
        actor=request.user,
        trigger=trigger_of(request),
    )
    return JsonResponse({"run_id": run.pk, "status": run.status}, status=202)


@allow("GET")
@api_requires(Permission.READ)
@service_errors
def run_detail(request, run_id: int):
    return JsonResponse(selectors.run_as_json(selectors.run_get(run_id=run_id)))


@api_requires(Permission.OPERATE_RUNS)
@service_errors
def run_stop_view(request, run_id: int):
    if request.method != "POST":
        return method_not_allowed(["POST"])
    body = json_body(request) if request.body else {}
    run = run_stop(
        run_id=run_id,
        actor=request.user,
        trigger=trigger_of(request),
        reason=field(body, "reason", str, required=False, default=""),
    )
    return JsonResponse({"run_id": run.pk, "status": run.status}, status=202)


@service_errors
def run_reconfigurations(request, run_id: int):
    if request.method == "POST":
        return _reconfigure(request, run_id)
    if request.method == "GET":
        return _reconfiguration_list(request, run_id)
    return method_not_allowed(["GET", "POST"])


@api_requires(Permission.OPERATE_RUNS)
@service_errors
def _reconfigure(request, run_id: int):
    reconfiguration, created = reconfiguration_request(
        run_id=run_id, body=json_body(request), actor=request.user, trigger=trigger_of(request)
    )
    return JsonResponse(
        {"id": reconfiguration.pk, "status": reconfiguration.status, "created": created}, status=202
    )


@api_requires(Permission.READ)
@service_errors
def _reconfiguration_list(request, run_id: int):
    run = selectors.run_get(run_id=run_id)
    page = page_of(request, run.reconfigurations.select_related("actor").order_by("-id"),
                   selectors.reconfiguration_as_json)
    return JsonResponse({"run": run.pk, "reconfigurations": page["items"], "page": page["page"]})


@api_requires(Permission.OPERATE_RUNS)
@service_errors
def run_reconfiguration_preview(request, run_id: int):
    if request.method != "POST":
        return method_not_allowed(["POST"])
    return JsonResponse(reconfiguration_preview(run_id=run_id, body=json_body(request)))


@allow("GET")
@api_requires(Permission.READ)
@service_errors
def reconfiguration_detail(request, reconfiguration_id: int):
    found = selectors.reconfiguration_get(reconfiguration_id=reconfiguration_id)
    return JsonResponse(selectors.reconfiguration_as_json(found))


@allow("GET")
@api_requires(Permission.READ)
@service_errors
def run_metrics(request, run_id: int):
    since = query_int(request, "since_epoch", default=0, low=0, high=2**63 - 1)
    limit = query_int(request, "limit", default=MAX_PAGE_SIZE, low=1, high=MAX_PAGE_SIZE)
    run = selectors.run_get(run_id=run_id)
    epochs = selectors.run_metrics(run=run, since_epoch=since, limit=limit + 1)
    following = epochs[limit]["epoch"] if len(epochs) > limit else None
    return JsonResponse({"run": run.pk, "epochs": epochs[:limit], "next_since_epoch": following})


@api_requires(Permission.OPERATE_RUNS)
@service_errors
def run_autoscale(request, run_id: int):
    if request.method != "POST":
        return method_not_allowed(["POST"])
    run = autoscale_configure(
        run_id=run_id, body=json_body(request), actor=request.user, trigger=trigger_of(request)
    )
    return JsonResponse(
        {
            "run": run.pk,
            "mode": run.autoscale_mode,
            "min": run.autoscale_min,
            "max": run.autoscale_max,
            "cooldown_s": run.autoscale_cooldown_s,
        }
    )
