"""Writes on runs: start, stop, and the status changes reported by drivers and the watcher.

The web process never talks to Spark: starting a run enqueues a Celery task that launches a
driver process for it; stopping sends a stop command through the run's control channel.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from webapp import engine_gateway
from webapp.audit.services import audit_record
from webapp.errors import Conflict, NotFound, ServiceError
from webapp.jobs.models import ACTIVE_RUN_STATUSES, Job, Run, RunStatus, Trigger
from webapp.jobs.selectors import job_version_get
from webapp.jobs.services import job_check_not_archived, job_sink_targets_claim
from webapp.live.events import job_event_publish
from webapp.runs.restarts import RestartPolicy

FINAL_STATUSES = (RunStatus.STOPPED, RunStatus.FAILED)


def run_dir(run_id: int) -> Path:
    """Where a run keeps its checkpoint, state and driver log."""
    return Path(settings.VAR_DIR) / "runs" / str(run_id)


def run_start(*, job_id: int, version: int | None, actor, trigger: str,
              restart: RestartPolicy | None = None) -> Run:
    """Record a run of a version (the latest by default), restarted after a crash as
    ``restart`` says (exponential back-off without end by default), and enqueue its launch."""
    from webapp.runs.tasks import run_launch

    restart = restart or RestartPolicy()
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            raise NotFound(f"there is no job {job_id}")
        job_check_not_archived(job=job, doing="starting a run")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            raise ServiceError("version must be a version number")
        job_version = job_version_get(job=job, number=version)
        version_check_runnable(job_version)
        # A target handed to another job since this version was saved is no longer its own.
        job_sink_targets_claim(job=job, document=job_version.dag)
        active = job.runs.filter(status__in=ACTIVE_RUN_STATUSES).first()
        if active is not None:
            raise Conflict(f"run {active.pk} of this job is {active.status}: stop it first")
        run = Run.objects.create(
            job=job, version=job_version, status=RunStatus.STARTING,
            spark_master=settings.SPARK_MASTER, checkpoint_location="", started_by=actor,
            parallelism=engine_gateway.dag_parallelism(job_version.dag),
            assignment=engine_gateway.dag_assignment(job_version.dag),
            target_dag=job_version.dag, restart_strategy=restart.strategy,
            restart_attempts=restart.attempts, restart_delay_s=restart.delay_s,
        )
        run.checkpoint_location = str(run_dir(run.pk) / "checkpoint")
        run.save(update_fields=["checkpoint_location"])
        audit_record(
            actor=actor, trigger=trigger, action="run.started", subject=run,
            outcome="requested",
            details={"version": job_version.number, "restart": restart.as_json()},
        )
        # Registered first: with Redis down the launch fails the run before anything else.
        transaction.on_commit(lambda: launch_enqueue(run_launch, run.pk))
        run_status_publish(run)
    return run


def version_check_runnable(job_version) -> None:
    """Stored versions are checked again: rules (allowed functions, paths, limits) may have
    tightened since the version was saved, and a version that fails them never starts."""
    problems = engine_gateway.dag_problems(job_version.dag)
    if problems:
        first = problems[0]
        raise Conflict(f"version {job_version.number} fails the job checks and cannot run: "
                       f"{first['where']}: {first['message']}", problems=problems)


def launch_enqueue(task, run_id: int) -> None:  # noqa: ANN001 - the Celery task
    """Enqueue the launch; a run whose launch cannot be enqueued (Redis down) fails at once,
    naming why, instead of staying "starting" with nobody to start it."""
    from webapp.dependencies import REDIS_DOWN, redis_down

    try:
        task.delay(run_id)
    except REDIS_DOWN as error:
        down = redis_down(error)
        run_status_set(run_id=run_id, status=RunStatus.FAILED,
                       detail=f"its launch could not be enqueued: {down}")
        raise down from error


MAX_STOP_REASON = 1000  # as any text field of the API


def run_stop(*, run_id: int, actor, trigger: str, reason: str = "") -> Run:
    """Ask a run to stop after its current epoch; its checkpoint and state are kept, to
    resume from (``webapp.runs.resumes``)."""
    if len(reason) > MAX_STOP_REASON or "\x00" in reason:
        raise ServiceError(f"the reason is {len(reason)} characters long: at most "
                           f"{MAX_STOP_REASON}, without NUL",
                           problems=[{"where": "field reason",
                                      "message": f"must be at most {MAX_STOP_REASON} characters"}])
    with transaction.atomic():
        run = run_locked(run_id)
        if run.status in FINAL_STATUSES:
            raise Conflict(f"run {run.pk} is already {run.status}")
        if run.status != RunStatus.STOPPING:
            run.status = RunStatus.STOPPING
            run.save(update_fields=["status"])
            audit_record(
                actor=actor, trigger=trigger, action="run.stopped", subject=run,
                reason=reason, outcome="requested", details={"state": "kept"},
            )
            run_status_publish(run)
            transaction.on_commit(lambda: engine_gateway.control_stop(run_id=run.pk))
    return run


def run_status_set(
    *, run_id: int, status: str, detail: str = "", output: str = "", epoch: int | None = None
) -> Run:
    """Record a status a driver or the watcher observed. A stopping run only ends, and a
    final status is never left. ``detail``: the cause in one line; ``output``: the driver's
    last output, kept apart from the cause (shown behind a disclosure)."""
    with transaction.atomic():
        run = run_locked(run_id)
        # Each restart is an event of its own, also of a run that never got back to running.
        if run.status in FINAL_STATUSES or (run.status == status != RunStatus.RECOVERING):
            return run
        if run.status == RunStatus.STOPPING and status not in FINAL_STATUSES:
            return run
        run.status = status
        fields = ["status"]
        if status == RunStatus.RUNNING and run.started_at is None:
            run.started_at = timezone.now()
            fields.append("started_at")
        if status in FINAL_STATUSES:
            run.stopped_at = timezone.now()
            run.failure_reason = failure_text(detail, output) if status == RunStatus.FAILED else ""
            run.autoscale_proposal = {}  # nothing is left to scale
            fields += ["stopped_at", "failure_reason", "autoscale_proposal"]
        if epoch is not None:
            run.current_epoch = epoch
            fields.append("current_epoch")
        run.save(update_fields=fields)
        if status in FINAL_STATUSES or status == RunStatus.RECOVERING:
            audit_record(
                actor=None, trigger=Trigger.SYSTEM, action=f"run.{status}", subject=run,
                outcome=status, reason=detail[:2000],
                details={"output": output[-OUTPUT_KEPT:]} if output else None,
            )
        if status in FINAL_STATUSES:
            from webapp.reconfigurations.services import reconfigurations_abandon

            reconfigurations_abandon(run=run, reason=f"the run {status} before it took effect")
        run_status_publish(run)
    return run


OUTPUT_KEPT = 8000  # characters of a driver's last output kept with a failure or restart
FAILURE_OUTPUT = "\nlast output:\n"


def failure_text(cause: str, output: str = "") -> str:
    """A failed run's ``failure_reason``: the cause on its first line, then the output."""
    return cause.strip() + (FAILURE_OUTPUT + output[-OUTPUT_KEPT:] if output else "")


def failure_parts(text: str) -> tuple[str, str]:
    """(cause in one line, driver output) of a ``failure_reason``."""
    head, _, output = (text or "").partition(FAILURE_OUTPUT.lstrip("\n"))
    return first_line(head).removesuffix(";").strip(), output.strip("\n")


def first_line(text: str) -> str:
    """The first non-empty line of ``text``, stripped."""
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "")


def run_driver_recorded(*, run_id: int, pid: int, host: str) -> None:
    Run.objects.filter(pk=run_id).update(driver_pid=pid, driver_host=host)


def run_heartbeat_record(*, run_id: int, pid: int) -> bool:
    """The driver ``pid`` of the run is alive and its query runs; False (and nothing
    recorded) for a driver the run no longer names, such as a predecessor shutting down."""
    return bool(Run.objects.filter(pk=run_id, driver_pid=pid)
                .update(driver_heartbeat_at=timezone.now()))


def run_query_started(*, run_id: int, pid: int) -> None:
    """The driver's query runs: the run is running from now on, whether data arrives or not."""
    if run_heartbeat_record(run_id=run_id, pid=pid):
        run_status_set(run_id=run_id, status=RunStatus.RUNNING)


def run_locked(run_id: int) -> Run:
    run = Run.objects.select_for_update().select_related("job").filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"there is no run {run_id}")
    return run


def run_status_publish(run: Run) -> None:
    job_event_publish(
        job_id=run.job_id,
        event={"type": "run.status", "job": run.job_id, "run": run.pk, "status": run.status,
               "epoch": run.current_epoch},
    )
