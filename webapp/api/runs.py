"""API views for runs, reconfigurations, metrics and autoscaling."""

from __future__ import annotations

from typing import Annotated

from django.http import HttpRequest, JsonResponse
from ninja import Body, Query
from ninja.responses import Status

from webapp.accounts.roles import Permission
from webapp.api.auth import requires
from webapp.api.http import ApiRouter, trigger_of
from webapp.api.paging import MAX_PAGE_SIZE, PageQuery, page_of
from webapp.api.schema import (
    MAX_ID,
    AutoscaleIn,
    AutoscaleOut,
    MetricsOut,
    PathId,
    PreviewOut,
    ReconfigurationAcceptedOut,
    ReconfigurationListOut,
    ReconfigurationOut,
    RunAcceptedOut,
    RunListOut,
    RunOut,
    RunResumeIn,
    RunStartIn,
    RunStateOut,
    RunStopIn,
    SampleIn,
    SampleOut,
    answers,
)
from webapp.autoscaling.services import autoscale_configure
from webapp.reconfigurations.requests import ReconfigurationBody
from webapp.reconfigurations.services import reconfiguration_preview, reconfiguration_request
from webapp.runs import selectors
from webapp.runs.restarts import restart_policy_of
from webapp.runs.resumes import run_resume, run_state_discard
from webapp.runs.services import run_start, run_stop
from webapp.samples.services import operator_sample_get, operator_sample_request, sample_as_json

router = ApiRouter(tags=["runs"])

# A body that may be left out, documented as the object it is when sent: JSON null is no
# object, and the body parser refuses it.
OptionalRunStart = Annotated[RunStartIn, Body(None)]
OptionalRunStop = Annotated[RunStopIn, Body(None)]
OptionalRunResume = Annotated[RunResumeIn, Body(None)]


@router.get("/runs/{id:id}", response=answers(200, RunOut, 404),
            summary="status, epoch, parallelism and latest metrics",
            auth=requires(Permission.READ))
def run_detail(request: HttpRequest, id: PathId):
    # A hot read: answered as the selector writes it, its model checked by the tests.
    return JsonResponse(selectors.run_as_json(selectors.run_answer_get(run_id=id)))


@router.get("/jobs/{id:id}/runs", response=answers(200, RunListOut, 400, 404),
            summary="the job's runs, newest first, one page", auth=requires(Permission.READ))
def run_list(request: HttpRequest, id: PathId, paging: Query[PageQuery]):
    page = page_of(selectors.job_runs(job_id=id), selectors.run_summary_as_json, paging,
                   items="runs")
    return {"job": id, **page}


@router.post("/jobs/{id:id}/runs", response=answers(202, RunAcceptedOut, 400, 404, 409, 413),
             summary="start a run of a version {version?} (the latest by default), restarted "
                     "after a crash as {restart?: {strategy, attempts?, delay_s?}} says",
             auth=requires(Permission.OPERATE_RUNS))
def run_start_view(request: HttpRequest, id: PathId, body: OptionalRunStart = None):
    asked = body.restart if body else None
    restart = restart_policy_of(strategy=asked.strategy, attempts=asked.attempts,
                                delay_s=asked.delay_s) if asked else None
    run = run_start(job_id=id, version=body.version if body else None, actor=request.user,
                    trigger=trigger_of(request), restart=restart)
    return Status(202, {"run_id": run.pk, "status": run.status})


@router.post("/runs/{id:id}/stop", response=answers(202, RunAcceptedOut, 400, 404, 409, 413),
             summary="stop the run after its current epoch {reason?}",
             auth=requires(Permission.OPERATE_RUNS))
def run_stop_view(request: HttpRequest, id: PathId, body: OptionalRunStop = None):
    run = run_stop(run_id=id, actor=request.user, trigger=trigger_of(request),
                   reason=body.reason if body else "")
    return Status(202, {"run_id": run.pk, "status": run.status})


@router.post("/runs/{id:id}/resume", response=answers(202, RunAcceptedOut, 400, 404, 409, 413),
             summary="start a stopped or failed run again from its kept state, on its own "
                     "version or, if the change is state-safe, on {version?}",
             auth=requires(Permission.OPERATE_RUNS))
def run_resume_view(request: HttpRequest, id: PathId, body: OptionalRunResume = None):
    run = run_resume(run_id=id, actor=request.user, trigger=trigger_of(request),
                     version=body.version if body else None)
    return Status(202, {"run_id": run.pk, "status": run.status})


@router.delete("/runs/{id:id}/state", response=answers(200, RunStateOut, 404, 409),
               summary="discard a stopped or failed run's kept state: it cannot be resumed",
               auth=requires(Permission.OPERATE_RUNS))
def run_state_discard_view(request: HttpRequest, id: PathId):
    run = run_state_discard(run_id=id, actor=request.user, trigger=trigger_of(request))
    return {"kept": False, "discarded_at": run.state_discarded_at.isoformat()}


@router.post("/runs/{id:id}/reconfigurations",
             response=answers(202, ReconfigurationAcceptedOut, 400, 404, 409, 413, 503),
             summary="request a reconfiguration; a repeated request_id is answered with the "
                     "first one", auth=requires(Permission.OPERATE_RUNS))
def reconfigure(request: HttpRequest, id: PathId, body: ReconfigurationBody):
    reconfiguration, created = reconfiguration_request(
        run_id=id, body=body, actor=request.user, trigger=trigger_of(request))
    return Status(202, {"id": reconfiguration.pk, "status": reconfiguration.status,
                        "created": created})


@router.get("/runs/{id:id}/reconfigurations", response=answers(200, ReconfigurationListOut,
                                                                400, 404),
            summary="the run's reconfigurations, newest first, one page",
            auth=requires(Permission.READ))
def reconfiguration_list(request: HttpRequest, id: PathId, paging: Query[PageQuery]):
    run = selectors.run_get(run_id=id)
    page = page_of(run.reconfigurations.select_related("actor").order_by("-id"),
                   selectors.reconfiguration_as_json, paging, items="reconfigurations")
    return {"run": run.pk, **page}


@router.post("/runs/{id:id}/reconfigurations/preview",
             response=answers(200, PreviewOut, 400, 404, 409, 413),
             summary="plan diff and predicted effect of a request, recording nothing",
             auth=requires(Permission.OPERATE_RUNS))
def reconfiguration_preview_view(request: HttpRequest, id: PathId, body: ReconfigurationBody):
    return reconfiguration_preview(run_id=id, body=body)


@router.get("/reconfigurations/{id:id}", response=answers(200, ReconfigurationOut, 404),
            summary="status, applied epoch, timings, state bytes moved, before/after",
            auth=requires(Permission.READ))
def reconfiguration_detail(request: HttpRequest, id: PathId):
    found = selectors.reconfiguration_get(reconfiguration_id=id)
    return selectors.reconfiguration_as_json(found)


@router.post("/runs/{id:id}/samples", response=answers(202, SampleOut, 400, 404, 409, 413, 503),
             summary="ask the run's driver for up to 20 rows {operator} emits in its next "
                     "epoch that has any; poll GET /api/samples/{id} for them",
             auth=requires(Permission.OPERATE_RUNS))
def sample_request(request: HttpRequest, id: PathId, body: SampleIn):
    sample = operator_sample_request(run_id=id, operator=body.operator, actor=request.user)
    return Status(202, sample_as_json(sample))


@router.get("/samples/{id:id}", response=answers(200, SampleOut, 404),
            summary="a data preview: waiting, or the rows with their columns",
            auth=requires(Permission.OPERATE_RUNS))
def sample_detail(request: HttpRequest, id: PathId):
    return sample_as_json(operator_sample_get(sample_id=id))


@router.get("/runs/{id:id}/metrics", response=answers(200, MetricsOut, 400, 404),
            summary="per-epoch, per-operator metrics with ETP from since_epoch, at most limit "
                    "epochs; next_since_epoch gives the next page (null at the end). Epochs "
                    "past METRICS_FULL_RESOLUTION_S are kept as one-minute roll-ups only",
            auth=requires(Permission.READ))
def run_metrics(request: HttpRequest, id: PathId,
                since_epoch: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
                limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = MAX_PAGE_SIZE):
    run = selectors.run_get(run_id=id)
    epochs = selectors.run_metrics(run=run, since_epoch=since_epoch, limit=limit + 1)
    following = epochs[limit]["epoch"] if len(epochs) > limit else None
    return {"run": run.pk, "epochs": epochs[:limit], "next_since_epoch": following}


@router.post("/runs/{id:id}/autoscale", response=answers(200, AutoscaleOut, 400, 404, 413),
             summary="the run's autoscaler: mode off|recommend|auto, min?, max?, cooldown_s?",
             auth=requires(Permission.OPERATE_RUNS))
def run_autoscale(request: HttpRequest, id: PathId, body: AutoscaleIn):
    # A bound left out stays as it is; "max": null lifts the upper bound (to the job's
    # key-group limit); a null min or cooldown_s is taken as left out.
    given = body.model_dump(exclude_unset=True)
    settings = {k: v for k, v in given.items() if v is not None or k == "max"}
    run = autoscale_configure(run_id=id, body=settings, actor=request.user,
                              trigger=trigger_of(request))
    return {"run": run.pk, "mode": run.autoscale_mode, "min": run.autoscale_min,
            "max": run.autoscale_max, "cooldown_s": run.autoscale_cooldown_s}

