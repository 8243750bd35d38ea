"""The JSON API. Views only parse, check the role, call one service or selector and answer."""

from __future__ import annotations

from django.http import JsonResponse

from webapp import engine_gateway
from webapp.accounts import services as account_services
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
from webapp.api.paging import page_of
from webapp.api.schema import openapi_document
from webapp.audit.selectors import AuditFilter, audit_entries, audit_entry_as_json
from webapp.jobs import selectors, services


def jobs(request):
    if request.method == "GET":
        return job_list(request)
    if request.method == "POST":
        return job_create(request)
    return method_not_allowed(["GET", "POST"])


@api_requires(Permission.READ)
def job_list(request):
    return JsonResponse(
        {"jobs": [{"id": j.pk, "name": j.name, "latest_version": j.latest_version}
                  for j in selectors.job_list()]}
    )


@api_requires(Permission.EDIT_JOBS)
@service_errors
def job_create(request):
    body = json_body(request)
    version = services.job_create(
        dag=body, actor=request.user, trigger=trigger_of(request),
        comment=request.GET.get("comment", "")[:500],
    )
    return JsonResponse({"id": version.job_id, "version": version.number}, status=201)


@api_requires(Permission.READ)
@service_errors
def job_detail(request, job_id: int):
    if request.method != "GET":
        return method_not_allowed(["GET"])
    return JsonResponse(selectors.job_as_json(selectors.job_get(job_id=job_id)))


@api_requires(Permission.EDIT_JOBS)
@service_errors
def job_versions(request, job_id: int):
    if request.method != "POST":
        return method_not_allowed(["POST"])
    body = json_body(request)
    version = services.job_version_create(
        job_id=job_id,
        dag=field(body, "dag", dict),
        base_version=field(body, "base_version", int),
        actor=request.user,
        trigger=trigger_of(request),
        comment=field(body, "comment", str, required=False, default=""),
    )
    return JsonResponse({"id": job_id, "version": version.number}, status=201)


@allow("GET")
@api_requires(Permission.READ)
@service_errors
def job_history(request, job_id: int):
    job = selectors.job_get(job_id=job_id)
    page = page_of(request, audit_entries(filters=AuditFilter(job_id=job.pk), limit=None),
                   audit_entry_as_json)
    return JsonResponse({"job": job.pk, "entries": page["items"], "page": page["page"]})


@allow("GET")
def schema(request):
    return JsonResponse(openapi_document())


@api_requires(Permission.MANAGE_USERS)
@service_errors
def users(request):
    if request.method != "POST":
        return method_not_allowed(["POST"])
    body = json_body(request)
    user = account_services.user_create(
        username=field(body, "username", str, max_length=150),
        role=field(body, "role", str, max_length=20),
        password=field(body, "password", str, required=False, max_length=128),
    )
    answer = {"id": user.pk, "username": user.username, "role": user.role}
    if field(body, "token", bool, required=False, default=False):
        answer["token"] = account_services.api_token_create(user=user)
    return JsonResponse(answer, status=201)


@allow("GET")
@api_requires(Permission.READ)
def catalog(request):
    return JsonResponse({"operators": engine_gateway.operator_catalog()})


@api_requires(Permission.READ)
@service_errors
def validate(request):
    if request.method != "POST":
        return method_not_allowed(["POST"])
    return JsonResponse(engine_gateway.dag_check(json_body(request)))
