"""Server-rendered pages. Each page has one template; htmx requests get its named partial."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from webapp import engine_gateway
from webapp.accounts.access import page_requires
from webapp.accounts.roles import Permission
from webapp.errors import NotFound, ServiceError
from webapp.jobs import selectors
from webapp.jobs.models import Trigger
from webapp.jobs.services import job_archive, job_restore
from webapp.pages.lookups import job_version_or_404

JOBS_PER_PAGE = 25
RUNS_PER_PAGE = 20


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
    """Jobs found by name, run status and archive, a page at a time; the filters live in the
    URL, so a filtered list can be bookmarked and works without scripts."""
    filters = {"q": request.GET.get("q", "").strip(), "state": request.GET.get("state", ""),
               "archived": request.GET.get("archived", "") or "hide"}
    context = {**filters, "nav": "jobs", "heading": "Jobs", "statuses": selectors.JOB_STATUSES,
               "archive_choices": selectors.JOB_ARCHIVE, "jobs": [], "filtered": False}
    try:
        found = selectors.job_search(text=filters["q"], status=filters["state"],
                                     archived=filters["archived"])
        page = _page(found, request.GET.get("page"), JOBS_PER_PAGE)
    except ServiceError as error:
        return render(request, "pages/job_list.html", {**context, "error": error}, status=400)
    kept = {k: v for k, v in filters.items() if v and not (k == "archived" and v == "hide")}
    context.update(
        jobs=[(job, selectors.job_shown_run(job=job)) for job in page],
        page=page, page_query=urlencode(kept), filtered=bool(kept),
    )
    return render(request, "pages/job_list.html", context)


def _page(items, number: str | None, size: int):
    """Page ``number`` (1 when absent; the last when past the end) of ``items``."""
    paginator = Paginator(items, size)
    if number in (None, ""):
        return paginator.page(1)
    if not (number.isascii() and number.isdigit()) or int(number[:12]) < 1:
        raise ServiceError(f"the page must be a whole number from 1, not {number[:20]!r}",
                           problems=[{"where": "page", "message": "must be a whole number"}])
    return paginator.page(min(int(number[:12]), paginator.num_pages))


@page_requires(Permission.READ)
@require_GET
def job_detail(request, job_id: int):
    job, version = job_version_or_404(job_id, request.GET.get("version"))
    try:
        runs = _page(selectors.job_run_list(job=job), request.GET.get("runs_page"), RUNS_PER_PAGE)
    except ServiceError as error:
        return render(request, "pages/error.html", {"error": error}, status=400)
    run = selectors.job_current_run(job=job)
    context = {
        "job": job,
        "version": version,
        "versions": job.versions.select_related("author").order_by("-number"),
        "shown_dag": engine_gateway.dag_shown(version.dag),
        "document": json.dumps(engine_gateway.dag_shown(version.dag), indent=2),
        "run": run,
        "shown_run": selectors.job_shown_run(job=job),
        "runs": runs,
        # The runs' pages keep the version shown (the latest is shown without one).
        "runs_query": "" if version.number == job.latest_version else f"version={version.number}",
        "archive_refused": _archive_refused(job, run),
        "nav": "jobs",
    }
    return render(request, _page_or_partial(request, "job_detail", "version-panel"), context)


def _archive_refused(job, run) -> str:
    """Why the job cannot be archived now ("" if it can), as the service would say it."""
    if job.archived_at is None and run is not None:
        return f"Run {run.pk} is {run.status}: stop it before archiving the job."
    return ""


@page_requires(Permission.EDIT_JOBS)
@require_POST
def job_archive_set(request, job_id: int):
    """Archive (``archived=1``) or restore (``archived=0``) a job, then show its page; a
    refusal is shown as its message."""
    change = {"1": job_archive, "0": job_restore}.get(request.POST.get("archived", ""))
    if change is None:
        error = ServiceError("the field archived must be 1 (archive) or 0 (restore)")
        return render(request, "pages/error.html", {"error": error, "nav": "jobs"}, status=400)
    try:
        change(job_id=job_id, actor=request.user, trigger=Trigger.USER,
               reason=request.POST.get("reason", "").strip())
    except NotFound as error:
        raise Http404(str(error)) from None
    except ServiceError as error:
        return render(request, "pages/error.html", {"error": error, "nav": "jobs"},
                      status=error.status)
    return redirect("job-detail", job_id=job_id)


def _page_or_partial(request, page: str, target: str) -> str:
    """The whole page, or just its `target` fragment when htmx asks to swap that element."""
    if request.headers.get("HX-Request") and request.headers.get("HX-Target") == target:
        return f"pages/partials/{target}.html"
    return f"pages/{page}.html"
