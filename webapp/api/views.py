"""The JSON API's jobs, users, catalog and validation. Views only call one service or selector
and answer; bodies are validated against their models (webapp.api.schema) before a view runs,
and a service's refusal is answered by the API's error handlers."""

from __future__ import annotations

from typing import Annotated, Literal

from django.http import HttpRequest, JsonResponse
from ninja import Body, Query
from ninja.responses import Status

from webapp import engine_gateway
from webapp.accounts import services as account_services
from webapp.accounts.roles import Permission
from webapp.api.auth import requires
from webapp.api.http import ApiRouter, trigger_of
from webapp.api.paging import PageQuery, page_of
from webapp.api.schema import (
    AnyDag,
    CatalogOut,
    Dag,
    HistoryOut,
    JobCreatedOut,
    JobListOut,
    JobOut,
    PathId,
    SinkTargetHandOverIn,
    SinkTargetListOut,
    SinkTargetOut,
    UserIn,
    UserOut,
    ValidationOut,
    VersionIn,
    answers,
)
from webapp.audit.selectors import AuditFilter, audit_entries, audit_entry_as_json
from webapp.jobs import selectors, services

router = ApiRouter(tags=["jobs"])

DagBody = Annotated[Dag, Body(...)]
CheckedBody = Annotated[AnyDag, Body(...)]
Comment = Annotated[str, Query("", description="why: shown in the history (its first 500 "
                                                "characters)")]
Archived = Annotated[
    Literal[tuple(selectors.JOB_ARCHIVE)],  # type: ignore[valid-type]
    Query("hide", description="archived jobs: " + ", ".join(
        f"{choice} ({meaning})" for choice, meaning in selectors.JOB_ARCHIVE.items())),
]


@router.get("/jobs", response=answers(200, JobListOut, 400),
            summary="list jobs, archived ones hidden unless asked for",
            auth=requires(Permission.READ))
def job_list(request: HttpRequest, archived: Archived = "hide"):
    return {"jobs": [selectors.job_summary_as_json(job)
                     for job in selectors.job_list(archived=archived)]}


@router.post("/jobs", response=answers(201, JobCreatedOut, 400, 409, 413, 429),
             summary="create a job from a DAG document", auth=requires(Permission.EDIT_JOBS))
def job_create(request: HttpRequest, dag: DagBody, comment: Comment = ""):
    version = services.job_create(dag=dag, actor=request.user, trigger=trigger_of(request),
                                  comment=comment[:500])
    return Status(201, {"id": version.job_id, "version": version.number})


@router.get("/jobs/{id:id}", response=answers(200, JobOut, 404),
            summary="the job, its versions and its current run", auth=requires(Permission.READ))
def job_detail(request: HttpRequest, id: PathId):
    # A hot read: answered as the selector writes it, its model checked by the tests.
    return JsonResponse(selectors.job_as_json(selectors.job_with_current_run(job_id=id)))


@router.post("/jobs/{id:id}/versions",
             response=answers(201, JobCreatedOut, 400, 404, 409, 413, 429),
             summary="add a version: {dag, base_version, comment}; 409 if base_version is "
                     "stale", auth=requires(Permission.EDIT_JOBS))
def job_versions(request: HttpRequest, id: PathId, body: VersionIn):
    version = services.job_version_create(
        job_id=id, dag=body.dag, base_version=body.base_version, actor=request.user,
        trigger=trigger_of(request), comment=body.comment)
    return Status(201, {"id": id, "version": version.number})


@router.get("/jobs/{id:id}/history", response=answers(200, HistoryOut, 400, 404),
            summary="the audit trail of the job, newest first, one page",
            auth=requires(Permission.READ))
def job_history(request: HttpRequest, id: PathId, paging: Query[PageQuery]):
    job = selectors.job_get(job_id=id)
    page = page_of(audit_entries(filters=AuditFilter(job_id=job.pk), limit=None),
                   audit_entry_as_json, paging, items="entries")
    return {"job": job.pk, **page}


@router.post("/users", response=answers(201, UserOut, 400, 409, 413), exclude_unset=True,
             summary="create a user with a role, and a token if asked (admins)",
             auth=requires(Permission.MANAGE_USERS))
def users(request: HttpRequest, body: UserIn):
    user = account_services.user_create(username=body.username, role=body.role,
                                        password=body.password)
    answer = {"id": user.pk, "username": user.username, "role": user.role}
    if body.token:
        answer["token"] = account_services.api_token_create(user=user)
    return Status(201, answer)


@router.get("/catalog", response=answers(200, CatalogOut),
            summary="operator types and their param schemas", auth=requires(Permission.READ))
def catalog(request: HttpRequest):
    return {"operators": engine_gateway.operator_catalog()}


@router.post("/validate", response=answers(200, ValidationOut, 400, 413, 429),
             exclude_unset=True,
             summary="validate a DAG document: every problem, or the plan and columns",
             auth=requires(Permission.READ))
def validate(request: HttpRequest, dag: CheckedBody):
    return services.job_document_check(dag=dag, actor=request.user)


@router.get("/sink-targets", response=answers(200, SinkTargetListOut),
            summary="the tables and folders jobs' sinks write to, each with its owner job",
            auth=requires(Permission.READ))
def sink_targets(request: HttpRequest):
    return {"targets": [selectors.sink_target_as_json(t) for t in selectors.sink_target_list()]}


@router.post("/sink-targets/hand-over", response=answers(200, SinkTargetOut, 400, 404, 413),
             summary="give a sink target to another job (admins)",
             auth=requires(Permission.MANAGE_USERS))
def sink_target_hand_over(request: HttpRequest, body: SinkTargetHandOverIn):
    target = services.sink_target_hand_over(
        kind=body.kind, name=body.name, job_id=body.job, actor=request.user,
        trigger=trigger_of(request), reason=body.reason)
    return selectors.sink_target_as_json(target)
