"""The autoscaler: per run off, recommend or auto, a closed loop on the engine's decision
(``engine.policies.autoscale``): DS2 on the offered load (sources' offered rate, backlog and
its growth) against each operator's or region's measured capacity, judged by the run's own
busy time. It scales up as soon as the operators fall behind, down only after
``AUTOSCALE_DOWN_WINDOW_S`` of calm, and never undoes its last decision within that window.
It decides from the epochs since the last change took effect and its cooldown passed;
recommend shows the decision for one-click approval, auto applies it through the same
recorded, audited workflow as a person's request, and audits the figures that drove it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from webapp import engine_gateway
from webapp.audit.models import AuditEntry
from webapp.audit.services import audit_record
from webapp.errors import NotFound, ServiceError
from webapp.jobs.models import AutoscaleMode, ReconfigurationStatus, Run, RunStatus, Trigger
from webapp.live.events import job_event_publish
from webapp.reconfigurations.services import reconfiguration_request

# Instances are bounded by key groups (at most 32768); a cooldown by a day.
AUTOSCALE_LIMITS = {"min": 32768, "max": 32768, "cooldown_s": 86400}


def autoscale_configure(*, run_id: int, body: dict[str, Any], actor, trigger: str) -> Run:
    """Set a run's autoscaling mode and bounds: ``min``, ``max`` (None: the job's key-group
    limit) instances per operator and ``cooldown_s``; a bound left out stays as it is."""
    mode = body.get("mode")
    if mode not in AutoscaleMode.values:
        raise _bad("mode", f"must be one of {', '.join(AutoscaleMode.values)}")
    bounds = {name: body[name] for name in ("min", "max", "cooldown_s") if name in body}
    for name, value in bounds.items():
        if name == "max" and value is None:
            continue
        top = AUTOSCALE_LIMITS[name]
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
            raise _bad(name, f"must be a whole number from 1 to {top}")
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("job").filter(pk=run_id).first()
        if run is None:
            raise NotFound(f"there is no run {run_id}")
        run.autoscale_mode = mode
        run.autoscale_min = bounds.get("min", run.autoscale_min)
        run.autoscale_max = bounds.get("max", run.autoscale_max)
        run.autoscale_cooldown_s = bounds.get("cooldown_s", run.autoscale_cooldown_s)
        _check_bounds(run)
        if mode == AutoscaleMode.OFF:
            run.autoscale_proposal = {}  # a recommendation of a loop that is off is stale
        run.save()
        audit_record(actor=actor, trigger=trigger, action="autoscale.configured", subject=run,
                     outcome="done", reason=_configured_summary(run),
                     details={"mode": mode, "min": run.autoscale_min, "max": run.autoscale_max,
                              "cooldown_s": run.autoscale_cooldown_s})
    return run


def autoscale_instance_limit(*, run: Run) -> int:
    """The most instances any operator of the run may take: its job's key groups."""
    document = run.target_dag or run.version.dag
    return int(document.get("key_groups", 128))


def _check_bounds(run: Run) -> None:
    limit = autoscale_instance_limit(run=run)
    for name, value in (("min", run.autoscale_min), ("max", run.autoscale_max)):
        if value is not None and value > limit:
            raise _bad(name, f"must be at most {limit}, the job's key groups (no operator "
                             "can take more instances)")
    if run.autoscale_max is not None and run.autoscale_max < run.autoscale_min:
        raise _bad("max", f"must not be below min ({run.autoscale_min})")


def _configured_summary(run: Run) -> str:
    top = run.autoscale_max if run.autoscale_max is not None else "the key-group limit"
    return (f"mode {run.autoscale_mode}: {run.autoscale_min} to {top} instances per operator, "
            f"{run.autoscale_cooldown_s} s cooldown")


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
    """One turn of the closed loop for a run: wait while a change is pending and through
    its cooldown, then decide from the epochs measured since it took effect; in auto mode
    apply the decision's changes, audited with the figures that drove it."""
    proposal = autoscale_proposal(run=run)
    Run.objects.filter(pk=run.pk).update(autoscale_proposal=proposal)
    changes = proposal.get("changes") or {}
    before = run.autoscale_proposal or {}
    # The panel says what the loop does (proposes, waits, cools down): refreshed when that
    # changes, not only when the proposed changes do.
    if (changes, proposal.get("action"), proposal.get("note")) != \
            (before.get("changes", {}), before.get("action"), before.get("note")):
        job_event_publish(job_id=run.job_id, event={
            "type": "run.autoscale", "job": run.job_id, "run": run.pk,
            "mode": run.autoscale_mode, "changes": changes})
    if run.autoscale_mode != AutoscaleMode.AUTO or not changes:
        return "proposed" if changes else None
    with transaction.atomic():
        audit_record(actor=None, trigger=Trigger.POLICY, action="autoscale.decided", subject=run,
                     outcome=proposal["action"],
                     details={"changes": changes, "reasons": proposal["reasons"],
                              "figures": proposal.get("figures", {}),
                              "epochs": proposal.get("epochs")})
    stamp = f"{timezone.now().timestamp():.0f}"
    for operator, parallelism in changes.items():
        reconfiguration_request(
            run_id=run.pk, actor=None, trigger=Trigger.POLICY,
            body={"kind": "rescale", "operator": operator, "parallelism": parallelism,
                  "reason": proposal["reasons"][operator],
                  "request_id": f"autoscale-{run.pk}-{operator}-{stamp}"},
        )
    Run.objects.filter(pk=run.pk).update(autoscale_last_action_at=timezone.now())
    return "scaled " + ", ".join(f"{op} to {n}" for op, n in changes.items())


def autoscale_proposal(*, run: Run) -> dict[str, Any]:
    """The decision now, from the epochs measured since the last change took effect, as
    the proposal a person reviews (recommend) or the loop applies (auto)."""
    now = timezone.now()
    waiting = autoscale_waiting(run=run, now=now)
    if waiting:
        return {"at": now.isoformat(), "action": "wait", "changes": {}, "reasons": {},
                "note": waiting}
    window_s = settings.AUTOSCALE_DOWN_WINDOW_S
    # A scale-down judges the last window of epochs; twice its span in recording time
    # covers it even when epochs are recorded late.
    recent = run.epochs.filter(epoch__gt=_last_applied_epoch(run),
                               recorded_at__gte=now - timedelta(seconds=2 * window_s))
    loads = [e.load for e in recent.order_by("-epoch")[:MAX_EPOCHS]]
    try:
        decision = engine_gateway.load_decide(
            run.target_dag, epochs=list(reversed(loads)), min_parallelism=run.autoscale_min,
            max_parallelism=run.autoscale_max, down_window_s=window_s,
            last=_last_decided(run, now))
    except ServiceError as error:
        return {"at": now.isoformat(), "action": "wait", "changes": {}, "reasons": {},
                "note": str(error)}
    return {"at": now.isoformat(), "epochs": [e.get("epoch") for e in loads][::-1],
            **decision}


# Each epoch of the window is judged on its own: a bound on the work of one decision (a run
# of epochs shorter than the window over this many is never calm long enough to scale down).
MAX_EPOCHS = 3000


def _last_decided(run: Run, now) -> dict[str, Any] | None:
    """The autoscaler's last change of ``run``: its direction and age."""
    entry = AuditEntry.objects.filter(action="autoscale.decided", run_id_ref=run.pk,
                                      outcome__in=("up", "down")).order_by("-at", "-id").first()
    if entry is None:
        return None
    return {"action": entry.outcome, "age_s": (now - entry.at).total_seconds()}


def autoscale_waiting(*, run: Run, now=None) -> str | None:
    """Why the autoscaler does not decide now (a change pending, or its cooldown), or None."""
    now = now or timezone.now()
    open_changes = run.reconfigurations.filter(
        status__in=(ReconfigurationStatus.REQUESTED, ReconfigurationStatus.PENDING))
    if open_changes.exists():
        return "waiting for the last change to take effect"
    last = run.reconfigurations.filter(applied_at__isnull=False).order_by("-applied_at").first()
    if last is not None and (now - last.applied_at).total_seconds() < run.autoscale_cooldown_s:
        return f"cooling down after the change applied at epoch {last.applied_epoch}"
    return None


def _last_applied_epoch(run: Run) -> int:
    last = run.reconfigurations.filter(applied_epoch__isnull=False).order_by(
        "-applied_epoch").first()
    return -1 if last is None else last.applied_epoch


def _bad(name: str, message: str) -> ServiceError:
    return ServiceError(f"field {name!r} {message}",
                        problems=[{"where": f"field {name}", "message": message}])
