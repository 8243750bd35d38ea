"""The autoscaler: per run off, recommend or auto. It proposes DS2's parallelism from true
rates within the run's bounds, shows every proposal, and in auto mode applies one change per
cooldown through the same recorded, audited workflow as a person's request."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from webapp import engine_gateway
from webapp.audit.services import audit_record
from webapp.errors import NotFound, ServiceError
from webapp.jobs.models import AutoscaleMode, ReconfigurationStatus, Run, RunStatus, Trigger
from webapp.live.events import job_event_publish
from webapp.reconfigurations import figures
from webapp.reconfigurations.services import reconfiguration_request


def autoscale_configure(*, run_id: int, body: dict[str, Any], actor, trigger: str) -> Run:
    """Set a run's autoscaling mode and bounds."""
    mode = body.get("mode")
    if mode not in AutoscaleMode.values:
        raise _bad("mode", f"must be one of {', '.join(AutoscaleMode.values)}")
    settings = {name: body[name] for name in ("min", "max", "cooldown_s") if name in body}
    for name, value in settings.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise _bad(name, "must be a whole number of at least 1")
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("job").filter(pk=run_id).first()
        if run is None:
            raise NotFound(f"there is no run {run_id}")
        run.autoscale_mode = mode
        run.autoscale_min = settings.get("min", run.autoscale_min)
        run.autoscale_max = settings.get("max", run.autoscale_max)
        run.autoscale_cooldown_s = settings.get("cooldown_s", run.autoscale_cooldown_s)
        if run.autoscale_max is not None and run.autoscale_max < run.autoscale_min:
            raise _bad("max", "must not be below min")
        run.save()
        audit_record(actor=actor, trigger=trigger, action="autoscale.configured", job=run.job,
                     run_id=run.pk, outcome="done",
                     details={"mode": mode, "min": run.autoscale_min, "max": run.autoscale_max,
                              "cooldown_s": run.autoscale_cooldown_s})
    return run


def autoscale_evaluate() -> list[str]:
    """One pass over the running runs whose autoscaler is on."""
    notes = []
    for run in Run.objects.filter(status=RunStatus.RUNNING).exclude(
            autoscale_mode=AutoscaleMode.OFF):
        note = autoscale_evaluate_run(run=run)
        if note:
            notes.append(f"run {run.pk}: {note}")
    return notes


def autoscale_evaluate_run(*, run: Run) -> str | None:
    proposal = autoscale_proposal(run=run)
    Run.objects.filter(pk=run.pk).update(autoscale_proposal=proposal)
    changes = proposal.get("changes") or {}
    if changes != (run.autoscale_proposal or {}).get("changes", {}):
        job_event_publish(job_id=run.job_id, event={
            "type": "run.autoscale", "job": run.job_id, "run": run.pk,
            "mode": run.autoscale_mode, "changes": changes})
    if run.autoscale_mode != AutoscaleMode.AUTO or not changes or not _cooled_down(run):
        return "proposed" if changes else None
    if run.reconfigurations.filter(status__in=(ReconfigurationStatus.REQUESTED,
                                               ReconfigurationStatus.PENDING)).exists():
        return "waiting for the previous change"
    operator, parallelism = max(changes.items(), key=lambda kv: abs(kv[1] - _current(run, kv[0])))
    reconfiguration_request(
        run_id=run.pk, actor=None, trigger=Trigger.POLICY,
        body={"kind": "rescale", "operator": operator, "parallelism": parallelism,
              "reason": proposal["reasons"][operator],
              "request_id": f"autoscale-{run.pk}-{timezone.now().timestamp():.0f}"},
    )
    Run.objects.filter(pk=run.pk).update(autoscale_last_action_at=timezone.now())
    return f"rescaled {operator} to {parallelism}"


def autoscale_proposal(*, run: Run) -> dict[str, Any]:
    """DS2's parallelism per operator within bounds, with a reason for each change."""
    rates = figures.measured_rates(run=run)
    if len(rates) < len(run.target_dag.get("operators", [])):
        return {"at": timezone.now().isoformat(), "changes": {}, "reasons": {},
                "note": "waiting for measured rates of every operator"}
    try:
        recommended = engine_gateway.rates_recommend(run.target_dag, rates)
    except ServiceError as error:
        return {"at": timezone.now().isoformat(), "changes": {}, "reasons": {}, "note": str(error)}
    limits = engine_gateway.dag_limits(run.target_dag)
    changes, reasons = {}, {}
    for op_id, wanted in recommended.items():
        bounded = _bounded(run, wanted, limits[op_id]["max"])
        if bounded != _current(run, op_id) and limits[op_id]["pinned_reason"] is None:
            changes[op_id] = bounded
            reasons[op_id] = _reason(op_id, wanted, bounded, rates.get(op_id, {}), run)
    return {"at": timezone.now().isoformat(), "changes": changes, "reasons": reasons,
            "recommended": recommended}


def _reason(op_id: str, wanted: int, bounded: int, rates: dict, run: Run) -> str:
    current = _current(run, op_id)
    capacity = (rates.get("processing_rate") or 0.0) / max(current, 1)
    bound = "" if bounded == wanted else f" (DS2 said {wanted}; kept within bounds)"
    return (f"autoscaler (DS2): {op_id} {current} -> {bounded} instances for "
            f"{rates.get('input_rate', 0):.0f} rows/s in at {capacity:.0f} rows/s per "
            f"instance{bound}")


def _bounded(run: Run, wanted: int, limit: int) -> int:
    upper = min(limit, run.autoscale_max or limit)
    return max(min(wanted, upper), min(run.autoscale_min, upper))


def _current(run: Run, op_id: str) -> int:
    for op in run.target_dag.get("operators", []):
        if op["id"] == op_id:
            return op.get("parallelism", 1)
    return 1


def _cooled_down(run: Run) -> bool:
    last = run.autoscale_last_action_at
    return last is None or (timezone.now() - last).total_seconds() >= run.autoscale_cooldown_s


def _bad(name: str, message: str) -> ServiceError:
    return ServiceError(f"field {name!r} {message}",
                        problems=[{"where": f"field {name}", "message": message}])
