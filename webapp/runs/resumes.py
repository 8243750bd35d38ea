"""Resume, upgrade and discard: what can be done with the state a stopped run keeps.

Stopping a run keeps its checkpoint (epoch log, sources' positions, files taken) and its keyed
state. Resuming starts a driver on them again, so the run continues exactly once: windows
that began before the stop close with rows from both sides. Resuming on another version of
the job (an upgrade: Flink's restore of a savepoint into a new jar) is allowed when the change
is state-safe by the rule of live logic changes. Discarding deletes the state; a discarded run
cannot be resumed.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from webapp import engine_gateway
from webapp.audit.services import audit_record
from webapp.errors import Conflict, ServiceError
from webapp.jobs.models import ACTIVE_RUN_STATUSES, Job, Run, RunStatus
from webapp.jobs.selectors import job_version_get
from webapp.jobs.services import job_check_not_archived, job_sink_targets_claim
from webapp.runs.selectors import run_kept_state
from webapp.runs.services import (
    FINAL_STATUSES,
    launch_enqueue,
    run_locked,
    run_status_publish,
    version_check_runnable,
)


def run_resume(*, run_id: int, actor, trigger: str, version: int | None = None) -> Run:
    """Start a stopped or failed run again from its kept state, on its own version or, when
    the change is state-safe, on ``version`` of its job; enqueue its launch."""
    from webapp.runs.tasks import run_launch

    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise ServiceError("version must be a version number")
    with transaction.atomic():
        # The job first, then the run, as a start locks them: no deadlock between the two.
        job_id = Run.objects.filter(pk=run_id).values_list("job_id", flat=True).first()
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        run = run_locked(run_id)
        assert job is not None
        job_check_not_archived(job=job, doing="resuming a run")
        kept = _resumable(run)
        active = job.runs.filter(status__in=ACTIVE_RUN_STATUSES).first()
        if active is not None:
            raise Conflict(f"run {active.pk} of this job is {active.status}: stop it before "
                           f"resuming run {run.pk}")
        before = run.version.number
        upgrade = version is not None and version != before
        if upgrade:
            _upgrade(run, job_version_get(job=job, number=version))
        else:
            version_check_runnable(run.version)  # rules may have tightened since it stopped
        job_sink_targets_claim(job=job, document=run.version.dag)
        run.status, run.stopped_at, run.failure_reason = RunStatus.STARTING, None, ""
        run.restarts, run.driver_heartbeat_at = 0, None
        # As a new run: the watcher looks at it once its launch records the driver and host.
        run.driver_pid, run.driver_host = None, ""
        run.save()
        audit_record(
            actor=actor, trigger=trigger, action="run.upgraded" if upgrade else "run.resumed",
            subject=run, outcome="requested",
            details={"from_version": before, "version": run.version.number, "state": kept},
        )
        transaction.on_commit(lambda: launch_enqueue(run_launch, run.pk))
        run_status_publish(run)
    return run


def _resumable(run: Run) -> dict[str, Any]:
    """The run's kept state, or Conflict naming why it cannot be resumed."""
    if run.status not in FINAL_STATUSES:
        raise Conflict(f"run {run.pk} is {run.status}: only a stopped or failed run can be "
                       "resumed", problems=[{"where": "run", "message": f"is {run.status}"}])
    kept = run_kept_state(run=run)
    assert kept is not None
    if not kept["kept"]:
        why = (f"its state was discarded at {kept['discarded_at']}" if kept["discarded_at"]
               else "it kept no state (it never ran an epoch)")
        raise Conflict(f"run {run.pk} cannot be resumed: {why}; start a new run",
                       problems=[{"where": "run", "message": why}])
    return kept


def _upgrade(run: Run, version) -> None:  # noqa: ANN001 - a JobVersion
    """The run moved to ``version``, whose change from what the run last ran (its target,
    live changes included) must be state-safe."""
    version_check_runnable(version)
    engine_gateway.plan_upgrade_check(run.target_dag, version.dag, version=version.number)
    run.version, run.target_dag = version, version.dag
    run.parallelism = engine_gateway.dag_parallelism(version.dag)
    run.assignment = engine_gateway.dag_assignment(version.dag)


def run_state_discard(*, run_id: int, actor, trigger: str) -> Run:
    """Delete a stopped or failed run's checkpoint and keyed state; it cannot be resumed."""
    with transaction.atomic():
        run = run_locked(run_id)
        if run.status not in FINAL_STATUSES:
            raise Conflict(f"run {run.pk} is {run.status}: its state is in use; stop it first",
                           problems=[{"where": "run", "message": f"is {run.status}"}])
        if run.state_discarded_at is not None:
            raise Conflict(f"run {run.pk}'s state was already discarded at "
                           f"{run.state_discarded_at.isoformat()}")
        kept = run_kept_state(run=run)
        run.state_discarded_at = timezone.now()
        run.save(update_fields=["state_discarded_at"])
        audit_record(actor=actor, trigger=trigger, action="run.state_discarded", subject=run,
                     outcome="discarded", details={"state": kept})
        # Inside the transaction: a discard that fails leaves the run marked as it was, and
        # the checkpoint, renamed first, is never resumed from half-deleted.
        engine_gateway.state_discard(run_id=run.pk, checkpoint=run.checkpoint_location,
                                     master=run.spark_master)
    return run
