"""Reads on runs: status, parallelism, metrics, and the snapshot a live page starts from."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from webapp import engine_gateway
from webapp.errors import NotFound
from webapp.jobs.metrics import KEYED_OPERATOR_FIELDS
from webapp.jobs.models import (
    Job,
    JobVersion,
    OperatorEpoch,
    Reconfiguration,
    Run,
    RunEpoch,
    RunStatus,
)
from webapp.runs.restarts import restart_policy_of_run
from webapp.written_once import epoch_answers


def run_get(*, run_id: int) -> Run:
    try:  # get() compiles a cheaper query than filter().first(): no ordering
        return Run.objects.select_related("job", "version").get(pk=run_id)
    except Run.DoesNotExist:
        raise NotFound(f"there is no run {run_id}") from None


def run_answer_get(*, run_id: int) -> Run:
    """The run with the columns ``run_as_json`` shows and its version's number, in one query
    written once: ``GET /api/runs/{id}`` asks for it many times a second, and the ORM would
    compile its joins on each request and read the job and both documents besides."""
    found = list(Run.objects.raw(_RUN_ANSWER_SQL, [run_id]))
    if not found:
        raise NotFound(f"there is no run {run_id}")
    run = found[0]
    run.version = JobVersion(pk=run.version_id, number=run.version_number)  # type: ignore[attr-defined]
    return run


_RUN_ANSWER_COLUMNS = (
    "id", "job_id", "version_id", "status", "current_epoch", "parallelism", "assignment",
    "spark_master", "restarts", "failure_reason", "created_at", "started_at", "stopped_at",
    "autoscale_mode", "autoscale_proposal", "restart_strategy", "restart_attempts",
    "restart_delay_s", "driver_heartbeat_at", "checkpoint_location", "state_discarded_at")
_RUN_ANSWER_SQL = (
    f"SELECT {', '.join('r.' + c for c in _RUN_ANSWER_COLUMNS)}, v.number AS version_number "
    f'FROM "{Run._meta.db_table}" r JOIN "{JobVersion._meta.db_table}" v ON v.id = r.version_id '
    "WHERE r.id = %s"
)


def job_runs(*, job_id: int):
    """The job's runs, newest first; NotFound if there is no such job."""
    if not Job.objects.filter(pk=job_id).exists():
        raise NotFound(f"there is no job {job_id}")
    return Run.objects.select_related("version").filter(job_id=job_id).order_by("-id")


def run_summary_as_json(run: Run) -> dict[str, Any]:
    """A run in a list: what it is and how it stands, without its metrics."""
    return {
        "id": run.pk, "job": run.job_id, "version": run.version.number, "status": run.status,
        "epoch": run.current_epoch, "restarts": run.restarts,
        "started_at": _iso(run.started_at), "stopped_at": _iso(run.stopped_at),
    }


def run_as_json(run: Run) -> dict[str, Any]:
    metrics = run_latest_metrics(run=run)
    return {
        "id": run.pk,
        "job": run.job_id,
        "version": run.version.number,
        "status": run.status,
        "epoch": run.current_epoch,
        "parallelism": run.parallelism,
        "assignment": run.assignment,
        "spark_master": run.spark_master,
        "restarts": run.restarts,
        "failure_reason": run.failure_reason or None,
        "started_at": _iso(run.started_at),
        "stopped_at": _iso(run.stopped_at),
        "autoscale": {"mode": run.autoscale_mode, "proposal": run.autoscale_proposal or None},
        "restart": restart_policy_of_run(run).as_json(),
        "heartbeat_at": _iso(run.driver_heartbeat_at),
        "state": run_kept_state(run=run),
        "activity": run_activity(run=run, last_epoch_at=metrics.get("at")),
        "metrics": metrics,
    }


def run_kept_state(*, run: Run) -> dict[str, Any] | None:
    """What a stopped or failed run keeps to resume from, measured by its store:
    ``{"kept": True, "bytes", "entries", "key_groups"}``, or ``{"kept": False,
    "discarded_at"}``; None for a run that is not over (its state is in use)."""
    if run.status not in (RunStatus.STOPPED, RunStatus.FAILED):
        return None
    if run.state_discarded_at is not None:
        return {"kept": False, "discarded_at": run.state_discarded_at.isoformat()}
    size = engine_gateway.state_kept(run_id=run.pk, checkpoint=run.checkpoint_location,
                                     master=run.spark_master)
    if size is None:
        return {"kept": False, "discarded_at": None}
    return {"kept": True, **size, "discarded_at": None}


# A running run with no epoch this long is idle: its sources have nothing new (Spark runs a
# micro-batch only for new data), which is no fault.
IDLE_AFTER_S = 30.0
# A driver that has not said it lives for this long (six beats) is named as silent.
HEARTBEAT_SILENT_S = 30.0


def run_activity(*, run: Run, last_epoch_at: str | None) -> str | None:
    """What a running run is doing: "processing", "idle: waiting for data", or that its
    driver has gone silent; None for a run that is not running."""
    if run.status != RunStatus.RUNNING:
        return None
    now = timezone.now()
    beat = run.driver_heartbeat_at
    if beat is not None and (now - beat).total_seconds() > HEARTBEAT_SILENT_S:
        return f"driver silent for {(now - beat).total_seconds():.0f} s"
    if last_epoch_at is None or (
            now - datetime.fromisoformat(last_epoch_at)).total_seconds() > IDLE_AFTER_S:
        return "idle: waiting for data"
    return "processing"


def run_activity_of(*, run: Run) -> str | None:
    """``run_activity`` with the run's latest epoch looked up."""
    return run_activity(run=run, last_epoch_at=run_latest_metrics(run=run).get("at"))


def run_latest_metrics(*, run: Run) -> dict[str, Any]:
    """The metrics of the run's current epoch (its newest if the run names none or that
    epoch's rows are gone), ``{}`` before any. An epoch's rows are written once, so its
    answer is kept per process and costs no query while the run stays at that epoch."""
    if run.current_epoch is None:
        return _epoch_metrics(run, None)
    return epoch_answers.get((run.pk, run.created_at, run.current_epoch),
                             lambda: _epoch_metrics(run, run.current_epoch))


def _epoch_metrics(run: Run, epoch: int | None) -> dict[str, Any]:
    found = run.epochs.filter(epoch=epoch).first() if epoch is not None else None
    if found is None:
        found = run.epochs.order_by("-epoch").first()
    return {} if found is None else epoch_as_json(found, _operators(run, found.epoch))


def run_metrics(*, run: Run, since_epoch: int, limit: int = 500) -> list[dict[str, Any]]:
    """Per-epoch, per-operator metrics from `since_epoch` on, oldest first."""
    epochs = list(run.epochs.filter(epoch__gte=since_epoch).order_by("epoch")[:limit])
    if not epochs:
        return []
    by_epoch: dict[int, list[OperatorEpoch]] = {}
    for row in OperatorEpoch.objects.filter(
        run=run, epoch__gte=epochs[0].epoch, epoch__lte=epochs[-1].epoch
    ):
        by_epoch.setdefault(row.epoch, []).append(row)
    return [epoch_as_json(e, by_epoch.get(e.epoch, [])) for e in epochs]


def epoch_as_json(epoch: RunEpoch, operators: list[OperatorEpoch]) -> dict[str, Any]:
    load = epoch.load or {}
    measured = load.get("operators") or {}
    return {
        "epoch": epoch.epoch,
        "at": epoch.recorded_at.isoformat(),
        "batch_duration_ms": epoch.batch_duration_ms,
        "backlog_rows": epoch.backlog_rows,
        "broker_sources": epoch.broker,
        "latency_ms": {"p50": epoch.latency_p50_ms, "p99": epoch.latency_p99_ms,
                       "max": epoch.latency_max_ms},
        "sources": load.get("sources") or {},
        "regions": load.get("regions") or {},
        "bottleneck": load.get("bottleneck"),
        "operators": {
            o.operator_id: {
                "instances": o.instances, "rows_in": o.rows_in, "rows_out": o.rows_out,
                "busy_ms": o.busy_ms, "input_rate": o.input_rate,
                "processing_rate": o.processing_rate, "output_rate": o.output_rate,
                "congested": o.congested, "etp": o.etp,
                "region": (measured.get(o.operator_id) or {}).get("region"),
                "demand_rate": (measured.get(o.operator_id) or {}).get("demand_rate"),
                **{name: (measured.get(o.operator_id) or {}).get(name)
                   for name in KEYED_OPERATOR_FIELDS},
            }
            for o in operators
        },
    }


def reconfiguration_get(*, reconfiguration_id: int) -> Reconfiguration:
    found = Reconfiguration.objects.select_related("run", "actor").filter(
        pk=reconfiguration_id).first()
    if found is None:
        raise NotFound(f"there is no reconfiguration {reconfiguration_id}")
    return found


def reconfiguration_as_json(r: Reconfiguration) -> dict[str, Any]:
    return {
        "id": r.pk,
        "run": r.run_id,
        "request_id": r.request_id,
        "kind": r.kind,
        "operators": r.operators,
        "status": r.status,
        "status_reason": r.status_reason or None,
        "reason": r.reason,
        "trigger": r.trigger,
        "actor": r.actor.username if r.actor else None,
        "applied_epoch": r.applied_epoch,
        "requested_at": _iso(r.requested_at),
        "applied_at": _iso(r.applied_at),
        "finished_at": _iso(r.finished_at),
        "control_latency_ms": r.control_latency_ms,
        "state_bytes_moved": r.state_bytes_moved,
        "plan_diff": r.plan_diff,
        "acks": r.acks,
        "before": r.before,
        "after": r.after,
        "predicted": r.predicted or None,
    }


# Recent epochs a live page starts from: enough for its longest window of smoothed figures.
SNAPSHOT_EPOCHS = 60


def run_snapshot(*, run_id: int, epochs: int = SNAPSHOT_EPOCHS) -> dict[str, Any]:
    """What a live page starts from: the run, its recent epochs in the compact live form
    (`[epoch, metrics]` pairs, as `run.epoch` events carry them) and its reconfigurations."""
    from webapp.runs.live import live_metrics

    run = run_get(run_id=run_id)
    recent = list(run.epochs.order_by("-epoch")[:epochs])
    since = recent[-1].epoch if recent else 0
    return {
        "type": "snapshot",
        "run": run_as_json(run),
        "epochs": [[e["epoch"], live_metrics(e, at=datetime.fromisoformat(e["at"]).timestamp())]
                   for e in run_metrics(run=run, since_epoch=since, limit=epochs)],
        "reconfigurations": [reconfiguration_as_json(r)
                             for r in run.reconfigurations.select_related("actor")[:50]],
    }


def _operators(run: Run, epoch: int) -> list[OperatorEpoch]:
    return list(OperatorEpoch.objects.filter(run=run, epoch=epoch))


def _iso(value) -> str | None:
    return None if value is None else value.isoformat()
