"""The job editor (a canvas of the graph, a palette of the catalog, a form per operator) and the
side-by-side diff between two versions. The editor saves through the JSON API, which holds the
rules: validation, and optimistic locking by base version."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_GET

from webapp import engine_gateway
from webapp.accounts.access import page_requires
from webapp.accounts.roles import Permission
from webapp.errors import NotFound, ServiceError
from webapp.jobs import selectors
from webapp.jobs.services import job_check_not_archived
from webapp.pages import diffs
from webapp.pages.lookups import int_or_none, job_version_or_404

BLANK_DOCUMENT = {"name": "", "key_groups": 128, "operators": [], "edges": []}


def _editor_config(*, job=None, version=None) -> dict:
    return {
        "job": job.pk if job else None,
        "job_name": job.name if job else None,
        "base_version": version.number if version else None,
        "latest_version": job.latest_version if job else None,
        "document": engine_gateway.dag_shown(version.dag) if version else BLANK_DOCUMENT,
        "catalog": engine_gateway.operator_catalog(),
        "ws": f"/ws/jobs/{job.pk}/" if job else None,
    }


@page_requires(Permission.EDIT_JOBS)
@require_GET
def job_new(request):
    return render(request, "pages/job_editor.html",
                  {"config": _editor_config(), "nav": "jobs", "job": None,
                   "limits": engine_gateway.document_limits()})


@page_requires(Permission.EDIT_JOBS)
@require_GET
def job_edit(request, job_id: int):
    job, version = job_version_or_404(job_id, request.GET.get("version"))
    try:
        job_check_not_archived(job=job, doing="editing it")
    except ServiceError as error:  # the save would be refused: no editor to lose work in
        return render(request, "pages/error.html", {"error": error, "nav": "jobs"},
                      status=error.status)
    return render(request, "pages/job_editor.html", {
        "config": _editor_config(job=job, version=version), "job": job, "version": version,
        "limits": engine_gateway.document_limits(), "nav": "jobs",
    })


@page_requires(Permission.READ)
@require_GET
def job_diff(request, job_id: int):
    try:
        job = selectors.job_get(job_id=job_id)
        right = selectors.job_version_get(job=job, number=int_or_none(request.GET.get("b")))
        left_number = int_or_none(request.GET.get("a")) or max(right.number - 1, 1)
        left = selectors.job_version_get(job=job, number=left_number)
    except NotFound as error:
        raise Http404(str(error)) from None
    return render(request, "pages/job_diff.html", {
        "job": job, "left": left, "right": right,
        "versions": job.versions.order_by("-number").values_list("number", flat=True),
        "rows": diffs.side_by_side(engine_gateway.dag_shown(left.dag),
                                   engine_gateway.dag_shown(right.dag)),
        "changes": diffs.plan_changes(left.dag, right.dag),
        "nav": "jobs",
    })
