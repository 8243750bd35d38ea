"""Server-rendered pages. Each page has one template; htmx requests get its named partial."""

from __future__ import annotations

import json

from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from webapp import engine_gateway
from webapp.accounts.access import page_requires
from webapp.accounts.roles import Permission
from webapp.errors import NotFound
from webapp.jobs import selectors
from webapp.jobs.models import ACTIVE_RUN_STATUSES


@require_GET
def healthz(request):
    """200 when every dependency answers, else 503; the body reports each one."""
    from webapp.dependencies import dependency_checks

    checks = dependency_checks()
    healthy = all(check["ok"] for check in checks.values())
    return JsonResponse({"status": "ok" if healthy else "degraded", "checks": checks},
                        status=200 if healthy else 503)


@page_requires(Permission.READ)
@require_GET
def job_list(request):
    query = request.GET.get("q", "").strip()[:200]
    state = request.GET.get("state", "")
    jobs = [(job, selectors.job_shown_run(job=job)) for job in selectors.job_list(name=query)]
    if state in ("running", "idle"):
        jobs = [(job, run) for job, run in jobs if _active(run) == (state == "running")]
    context = {"jobs": jobs, "nav": "jobs", "q": query, "state": state}
    return render(request, "pages/job_list.html", context)


@page_requires(Permission.READ)
@require_GET
def job_detail(request, job_id: int):
    try:
        job = selectors.job_get(job_id=job_id)
        number = _int_or_none(request.GET.get("version"))
        version = selectors.job_version_get(job=job, number=number)
    except NotFound as error:
        raise Http404(str(error)) from None
    context = {
        "job": job,
        "version": version,
        "versions": job.versions.select_related("author").order_by("-number"),
        "shown_dag": engine_gateway.dag_shown(version.dag),
        "document": json.dumps(engine_gateway.dag_shown(version.dag), indent=2),
        "run": selectors.job_current_run(job=job),
        "shown_run": selectors.job_shown_run(job=job),
        "runs": selectors.job_runs(job=job),
        "nav": "jobs",
    }
    return render(request, _page_or_partial(request, "job_detail", "version-panel"), context)


def _active(run) -> bool:
    return run is not None and run.status in ACTIVE_RUN_STATUSES


def _page_or_partial(request, page: str, target: str) -> str:
    """The whole page, or just its `target` fragment when htmx asks to swap that element."""
    if request.headers.get("HX-Request") and request.headers.get("HX-Target") == target:
        return f"pages/partials/{target}.html"
    return f"pages/{page}.html"


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None
