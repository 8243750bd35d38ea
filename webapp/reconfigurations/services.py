"""The reconfiguration workflow: validate a request against the run's plan, record it, deliver
it to the driver, and complete it from the driver's acknowledgement.

Every request is recorded before anything is sent (nothing is applied without its record), is
idempotent by its `request_id`, and is serialized per run by a row lock on the run: each request
builds on the plan the previous ones asked for, and the control channel delivers them in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import OperationalError, connection, transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone
from psycopg2 import errorcodes

from webapp import engine_gateway
from webapp.audit.services import audit_record
from webapp.dependencies import REDIS_DOWN, redis_down
from webapp.errors import Busy, Conflict, NotFound, ServiceError
from webapp.jobs.models import (
    Reconfiguration,
    ReconfigurationKind,
    ReconfigurationStatus,
    Run,
    RunStatus,
    Trigger,
)
from webapp.live.events import job_event_publish
from webapp.reconfigurations import figures
from webapp.reconfigurations.requests import (
    RELEASED_REQUEST_ID,
    ReconfigurationRequest,
    parse_request,
)

OPEN = (ReconfigurationStatus.REQUESTED, ReconfigurationStatus.PENDING)
# The kinds whose plan brings expressions of its own (a logic change's, a rollback target's):
# planned before the run is locked, since checking an expression of a new shape can load more
# of Spark's parser (seconds). The others read the run's target as it was stored (checked when
# it became the target) and check only what the request brings, without the parser: they plan
# under the lock, in a millisecond or less, saving a read of the run.
PLANNED_BEFORE_LOCK = (ReconfigurationKind.LOGIC, ReconfigurationKind.ROLLBACK)
# A request's wait for its run's lock, which requests and acknowledgements hold for
# milliseconds (a plan that may be slow is made before it is taken).
RUN_LOCK_WAIT_MS = 5000
RECONFIGURABLE = (RunStatus.STARTING, RunStatus.RUNNING, RunStatus.RECOVERING)
UNDELIVERED = "could not deliver: "


def reconfiguration_request(
    *, run_id: int, body: Any, actor, trigger: str
) -> tuple[Reconfiguration, bool]:
    """Record and deliver a reconfiguration; returns it and whether it is new (a repeated
    `request_id` returns the first one unchanged, unless that one could not be delivered:
    then the retry is recorded and delivered anew)."""
    request = parse_request(body)
    draft = _draft(run_id, request) if request.kind in PLANNED_BEFORE_LOCK else None
    with transaction.atomic():
        run = _locked_run(run_id, request.request_id)
        if run is None:
            raise NotFound(f"there is no run {run_id}")
        existing = (Reconfiguration.objects.get(pk=run.request_id_taken_by)
                    if run.request_id_taken_by is not None else None)
        if existing is not None and _undelivered(existing):
            _request_id_release(existing)
        elif existing is not None:
            if existing.request != request.as_json():
                raise Conflict(
                    f"request_id {request.request_id!r} was already used for another request "
                    f"(reconfiguration {existing.pk}): use a new request_id",
                    problems=[{"where": "field request_id",
                               "message": "already used with a different body"}])
            return existing, False
        if draft is not None and draft.base == run.target_dag:
            _check_live(run)
            after, commands = draft.after, draft.commands
        else:  # no draft, or the target moved since it (or it was refused): plan now
            after, commands = _checked_plan(run, request)
        reconfiguration = _record(run, request, after, commands, actor, trigger)
        run.target_dag = after
        run.save(update_fields=["target_dag"])
    return reconfiguration, True


def _undelivered(reconfiguration: Reconfiguration) -> bool:
    """Whether the request failed before its driver got it (its answer was a 503 with
    Retry-After): it had no effect, so its ``request_id`` may be used again."""
    return (reconfiguration.status == ReconfigurationStatus.FAILED
            and reconfiguration.status_reason.startswith(UNDELIVERED))


def _request_id_release(reconfiguration: Reconfiguration) -> None:
    """Let a retry under the same ``request_id`` be recorded anew, keeping the failed record
    (and its audit entries) under a reserved id; its ``request`` keeps the id it was sent with."""
    reconfiguration.request_id = f"{RELEASED_REQUEST_ID}{reconfiguration.pk}"
    reconfiguration.save(update_fields=["request_id"])


def _locked_run(run_id: int, request_id: str) -> Run | None:
    """The run, locked until the transaction ends, which serializes the run's requests and
    acknowledgements. NO KEY UPDATE: the driver's epoch rows, which reference the run, do not
    wait for it. A lock held longer than ``RUN_LOCK_WAIT_MS`` answers that the run is busy
    rather than queueing the request without end. Read in the same query:
    ``request_id_taken_by``, the run's reconfiguration with ``request_id``, if any."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = {int(RUN_LOCK_WAIT_MS)}")
    taken_by = Reconfiguration.objects.filter(run=OuterRef("pk"), request_id=request_id)
    try:
        return (Run.objects.select_for_update(no_key=True).select_related("job")
                .annotate(request_id_taken_by=Subquery(taken_by.values("pk")[:1]))
                .filter(pk=run_id).first())
    except OperationalError as error:
        if getattr(error.__cause__, "pgcode", None) != errorcodes.LOCK_NOT_AVAILABLE:
            raise
        raise Busy(f"run {run_id} is busy: other work has held it for more than "
                   f"{RUN_LOCK_WAIT_MS / 1000:g} s; try again shortly") from None


@dataclass(frozen=True)
class _Draft:
    """A request's plan made against ``base``, the run's target when it was made."""

    base: dict
    after: dict
    commands: list[dict[str, str]]


def _draft(run_id: int, request: ReconfigurationRequest) -> _Draft | None:
    """The request's plan against the run's target as it is now, made before the run is
    locked: planning can take seconds (a process's first expression check starts Spark's
    parser), and while the lock is held the driver's acknowledgements and the run's live
    figures wait for it. None when it cannot be made now: the locked request plans again,
    and refuses with the reason."""
    run = Run.objects.select_related("job").filter(pk=run_id).first()
    if run is None or run.status not in RECONFIGURABLE:
        return None
    try:
        after, commands = _plan(run, request)
    except ServiceError:
        return None
    return _Draft(base=run.target_dag, after=after, commands=commands)


def _checked_plan(run: Run, request: ReconfigurationRequest) -> tuple[dict, list[dict[str, str]]]:
    """Every check a request passes before it is recorded, and its plan: the preview runs
    exactly these, so what it shows is what applying would do."""
    _check_live(run)
    return _plan(run, request)


def _check_live(run: Run) -> None:
    if run.status not in RECONFIGURABLE:
        raise Conflict(f"run {run.pk} is {run.status}: only a live run can be reconfigured")


def _plan(run: Run, request: ReconfigurationRequest) -> tuple[dict, list[dict[str, str]]]:
    before = run.target_dag
    kind = request.kind
    if kind == ReconfigurationKind.REBALANCE:
        assignment = engine_gateway.plan_check_rebalance(
            before, operator=request.operator, assignment=request.assignment)
        return before, engine_gateway.rebalance_command(
            operator=request.operator, assignment=assignment, request_id=request.request_id)
    after = _after(run, request)
    return after, engine_gateway.commands_between(before, after, request_id=request.request_id)


def _after(run: Run, request: ReconfigurationRequest) -> dict:
    before, kind = run.target_dag, request.kind
    if kind == ReconfigurationKind.RESCALE:
        return engine_gateway.plan_rescale(
            before, operator=request.operator, parallelism=request.parallelism)
    if kind == ReconfigurationKind.LOGIC:
        return engine_gateway.plan_logic(before, operator=request.operator, params=request.params)
    if kind in (ReconfigurationKind.SCALE_OUT, ReconfigurationKind.SCALE_IN):
        rates = figures.measured_rates(run=run)
        plan = (engine_gateway.plan_scale_out_instances if kind == ReconfigurationKind.SCALE_OUT
                else engine_gateway.plan_scale_in_by_instances)
        return plan(before, rates=rates, instances=request.instances)
    if kind == ReconfigurationKind.ROLLBACK:
        return _rollback_target(run, request)
    raise ServiceError(f"{kind} reconfigurations are not supported on this deployment")


def _rollback_target(run: Run, request: ReconfigurationRequest) -> dict:
    if request.to_reconfiguration is not None:
        earlier = run.reconfigurations.filter(pk=request.to_reconfiguration).first()
        if earlier is None:
            raise NotFound(f"run {run.pk} has no reconfiguration {request.to_reconfiguration}")
        if earlier.status != ReconfigurationStatus.APPLIED:
            raise Conflict(f"reconfiguration {earlier.pk} is {earlier.status}: nothing to undo")
        target = earlier.plan_before
    else:
        version = run.job.versions.filter(number=request.to_version).first()
        if version is None:
            raise NotFound(f"job {run.job_id} has no version {request.to_version}")
        target = version.dag
    _check_same_operators(run.target_dag, target)
    if target == run.target_dag:
        raise ServiceError("the run already has that plan: nothing to roll back")
    return target


def _check_same_operators(current: dict, target: dict) -> None:
    def shape(doc):
        return ({(o["id"], o["type"]) for o in doc["operators"]},
                {(e["from"], e["to"]) for e in doc["edges"]})

    if shape(current) != shape(target):
        raise ServiceError("the target plan has other operators or edges: start a new run of "
                           "that version instead")


def _record(run, request, after, commands, actor, trigger) -> Reconfiguration:
    operators = sorted({c["operator"] for c in commands if c.get("operator")})
    diff = engine_gateway.plan_diff(run.target_dag, after) if after != run.target_dag else {
        "kinds": ["workload"], "affected_operators": operators,
        "changes": [{"kind": "workload", "operators": operators, "detail": "rebalance"}]}
    reconfiguration = Reconfiguration.objects.create(
        run=run, request_id=request.request_id, kind=request.kind, operators=operators,
        request=request.as_json(), plan_before=run.target_dag, plan_after=after, plan_diff=diff,
        actor=actor, reason=request.reason, trigger=trigger, commands=commands,
    )
    # Registered before any live event so that, once committed, the command reaches the driver
    # first: the control latency waits for nothing else (the before-figures and the browsers'
    # updates come after the send).
    transaction.on_commit(lambda: _deliver(reconfiguration.pk, run.pk, commands))
    audit_record(
        actor=actor, trigger=trigger, action=f"reconfiguration.{request.kind}",
        subject=reconfiguration, reason=request.reason,
        outcome=ReconfigurationStatus.REQUESTED, plan_diff=diff,
        details={"request": request.as_json()},
    )
    _publish(reconfiguration)
    return reconfiguration


def _deliver(reconfiguration_id: int, run_id: int, commands: list[dict[str, str]]) -> None:
    """Send the recorded commands; a delivery failure fails the record instead of hiding."""
    try:
        engine_gateway.control_send(run_id=run_id, messages=commands)
    except Exception as error:  # noqa: BLE001 - any transport failure ends the same way
        _settle(reconfiguration_id, ReconfigurationStatus.FAILED, f"{UNDELIVERED}{error}")
        if isinstance(error, REDIS_DOWN):
            raise redis_down(error) from error
        return
    Reconfiguration.objects.filter(
        pk=reconfiguration_id, status=ReconfigurationStatus.REQUESTED
    ).update(status=ReconfigurationStatus.PENDING)
    # The figures a change is judged by later: those measured before it and the preview's
    # prediction, made now rather than in the request's transaction, which they would lengthen.
    record = Reconfiguration.objects.select_related("run").get(pk=reconfiguration_id)
    Reconfiguration.objects.filter(pk=reconfiguration_id).update(
        before=figures.window_before(run_id=run_id),
        predicted=figures.predicted_of_instances(run=record.run, before=record.plan_before,
                                                 after=record.plan_after))


def reconfiguration_acknowledge(
    *, run_id: int, ack: engine_gateway.Ack
) -> Reconfiguration | None:
    """Apply a driver's acknowledgement of one command; the record completes when every
    command of it is acknowledged. A repeated acknowledgement changes nothing."""
    request_id = ack.request_id
    base = request_id.rsplit(".", 1)[0] if "." in request_id else request_id
    with transaction.atomic():
        run = Run.objects.select_for_update(no_key=True).filter(pk=run_id).first()
        reconfiguration = (
            Reconfiguration.objects.select_for_update()
            .filter(run_id=run_id, request_id__in={request_id, base}).first()
        )
        if run is None or reconfiguration is None:
            return None
        if any(a.get("request_id") == request_id for a in reconfiguration.acks):
            return reconfiguration
        reconfiguration.acks = [*reconfiguration.acks, _ack_record(ack)]
        if ack.status == "applied":
            if reconfiguration.kind == ReconfigurationKind.REBALANCE:
                _note_moves(run, reconfiguration, ack)
            _note_applied(run, ack)
        _complete_if_all_acked(run, reconfiguration)
        reconfiguration.save()
        if reconfiguration.status not in OPEN:
            _audit_outcome(reconfiguration)
        _publish(reconfiguration)
    return reconfiguration


def _note_moves(run: Run, reconfiguration: Reconfiguration, ack: engine_gateway.Ack) -> None:
    """A rebalance's plan diff names the key groups it moved: the driver's weighing decides
    which, so they are known once it acknowledges the new ranges."""
    after = (ack.after or {}).get("ranges")
    if not ack.operator or not after:
        return
    before = (ack.before or {}).get("ranges") or (run.assignment or {}).get(ack.operator)
    reconfiguration.plan_diff = engine_gateway.rebalance_moves_diff(
        run.target_dag, operator=ack.operator, before=before, after=after)


def _note_applied(run: Run, ack: engine_gateway.Ack) -> None:
    """The run's recorded parallelism and assignment are what the driver acknowledged."""
    operator, after = ack.operator, ack.after
    if not operator or "parallelism" not in after:
        return
    run.parallelism = {**run.parallelism, operator: int(after["parallelism"])}
    if after.get("ranges") is not None:
        run.assignment = {**run.assignment, operator: after["ranges"]}
    run.save(update_fields=["parallelism", "assignment"])


def _ack_record(ack: engine_gateway.Ack) -> dict[str, Any]:
    """The ack as the record keeps it (JSON): all but the configuration before."""
    record = ack.to_dict()
    del record["before"]
    return record


def _complete_if_all_acked(run: Run, reconfiguration: Reconfiguration) -> None:
    acks = reconfiguration.acks
    if len(acks) < len(reconfiguration.commands):
        return
    rejected = [a for a in acks if a.get("status") != "applied"]
    now = timezone.now()
    _target_acknowledged(run, reconfiguration)
    if rejected:
        reconfiguration.status = (ReconfigurationStatus.REJECTED if len(rejected) == len(acks)
                                  else ReconfigurationStatus.FAILED)
        reconfiguration.status_reason = "; ".join(
            f"{a.get('operator')}: {a.get('reason')}" for a in rejected)
        reconfiguration.finished_at = now
        return
    reconfiguration.status = ReconfigurationStatus.APPLIED
    ended = [a["epoch_ended_at_ms"] for a in acks if a.get("epoch_ended_at_ms") is not None]
    # When the first epoch run with every command of it committed (what a user waits for).
    reconfiguration.applied_at = (
        datetime.fromtimestamp(max(ended) / 1000.0, tz=UTC) if ended else now)
    reconfiguration.applied_epoch = max(int(a["applied_epoch"]) for a in acks)
    reconfiguration.control_latency_ms = max(float(a.get("control_latency_ms") or 0) for a in acks)
    reconfiguration.state_bytes_moved = sum(int(a.get("state_bytes_copied") or 0) for a in acks)


def _target_acknowledged(run: Run, reconfiguration: Reconfiguration) -> None:
    """Once every command is acknowledged, the run's target is the plan before it with exactly
    the acknowledged changes (all, some, or none of them), unless later requests build on it."""
    if run.reconfigurations.filter(pk__gt=reconfiguration.pk, status__in=OPEN).exists():
        return
    target = engine_gateway.plan_acknowledged(reconfiguration.plan_before,
                                              acks=reconfiguration.acks)
    if target != run.target_dag:
        run.target_dag = target
        run.save(update_fields=["target_dag"])


def _restore_target(reconfiguration: Reconfiguration) -> None:
    """A change that never reached the driver leaves the run's target as the driver runs it."""
    run = reconfiguration.run
    later = run.reconfigurations.filter(pk__gt=reconfiguration.pk, status__in=OPEN).exists()
    if not later:
        run.target_dag = reconfiguration.plan_before
        run.save(update_fields=["target_dag"])


def _audit_outcome(reconfiguration: Reconfiguration) -> None:
    """The trail records how each change ended, next to the entry of its request."""
    audit_record(
        actor=None, trigger=Trigger.SYSTEM,
        action=f"reconfiguration.{reconfiguration.status}",
        subject=reconfiguration, outcome=reconfiguration.status,
        reason=reconfiguration.status_reason, plan_diff=reconfiguration.plan_diff,
        details={"kind": reconfiguration.kind, "request_id": reconfiguration.request_id,
                 "applied_epoch": reconfiguration.applied_epoch,
                 "control_latency_ms": reconfiguration.control_latency_ms,
                 "state_bytes_copied": reconfiguration.state_bytes_moved},
    )


def reconfigurations_abandon(*, run: Run, reason: str) -> int:
    """Fail every open reconfiguration of a run that ended; none stays pending for ever."""
    count = 0
    for reconfiguration in run.reconfigurations.select_for_update().filter(status__in=OPEN):
        _settle(reconfiguration.pk, ReconfigurationStatus.FAILED, reason)
        count += 1
    return count


def _settle(reconfiguration_id: int, status: str, reason: str) -> None:
    with transaction.atomic():
        reconfiguration = Reconfiguration.objects.select_for_update().get(pk=reconfiguration_id)
        if reconfiguration.status not in OPEN:
            return
        reconfiguration.status = status
        reconfiguration.status_reason = reason
        reconfiguration.finished_at = timezone.now()
        reconfiguration.save(update_fields=["status", "status_reason", "finished_at"])
        _restore_target(reconfiguration)
        _audit_outcome(reconfiguration)
        _publish(reconfiguration)


def reconfigurations_finish_due(*, run_id: int, epoch: int) -> int:
    """Fill in the after-figures of applied changes once enough epochs have passed."""
    due = Reconfiguration.objects.filter(
        run_id=run_id, status=ReconfigurationStatus.APPLIED, finished_at__isnull=True,
        applied_epoch__lte=epoch - figures.WINDOW_EPOCHS,
    )
    for reconfiguration in due:
        reconfiguration.after = figures.window_after(
            run_id=run_id, applied_epoch=reconfiguration.applied_epoch,
            document=reconfiguration.plan_after)
        reconfiguration.finished_at = timezone.now()
        reconfiguration.save(update_fields=["after", "finished_at"])
    return len(due)


def _publish(reconfiguration: Reconfiguration) -> None:
    job_event_publish(
        job_id=reconfiguration.run.job_id,
        event={"type": "reconfiguration.status", "job": reconfiguration.run.job_id,
               "run": reconfiguration.run_id, "reconfiguration": reconfiguration.pk,
               "status": reconfiguration.status, "epoch": reconfiguration.applied_epoch},
    )


def reconfiguration_preview(*, run_id: int, body: Any) -> dict[str, Any]:
    """What a request would change, without recording or sending anything: the plan diff, the
    parallelism before and after, and the ETP predicted from the measured rates."""
    request = parse_request(body)
    run = Run.objects.select_related("job").filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"there is no run {run_id}")
    after, commands = _checked_plan(run, request)
    before = run.target_dag
    return {
        "kind": request.kind,
        "commands": len(commands),
        "plan_diff": engine_gateway.plan_diff(before, after) if after != before else {},
        "parallelism_before": engine_gateway.dag_parallelism(before),
        "parallelism_after": engine_gateway.dag_parallelism(after),
        "predicted": figures.predicted_effect(run=run, before=before, after=after),
    }
