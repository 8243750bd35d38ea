"""The data preview: up to 20 rows an operator of a running job emitted, asked of the run's
driver on its control channel and recorded from its answer, an acknowledgement like a
reconfiguration's. The driver serves it from the first epoch after the request in which the
operator emitted rows (a window aggregate emits only when a window closes), or says it had
none; the epoch never waits for it.

A read: not audited, as previews of changes are not.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.utils import timezone

from webapp import engine_gateway
from webapp.dependencies import REDIS_DOWN, redis_down
from webapp.errors import Conflict, NotFound, ServiceError
from webapp.jobs.models import RunStatus
from webapp.runs.selectors import run_get
from webapp.samples.models import OperatorSample, SampleStatus

# A driver is there, or will be, to read the channel: a request waits there for it.
SAMPLEABLE = (RunStatus.STARTING, RunStatus.RUNNING, RunStatus.RECOVERING)
RESTARTED = "the run's driver restarted before it took the rows: ask again"


def operator_sample_request(*, run_id: int, operator: str, actor) -> OperatorSample:
    """Record a request for rows of ``operator`` and send it to the run's driver; the
    operator's earlier answered samples go."""
    run = run_get(run_id=run_id)
    if operator not in {op["id"] for op in run.target_dag.get("operators", [])}:
        message = f"run {run_id} has no operator {operator!r}"
        raise ServiceError(message, problems=[{"where": "field operator", "message": message}])
    if run.status not in SAMPLEABLE:
        raise Conflict(f"run {run_id} is {run.status}: only a running run can show its data")
    run.samples.filter(operator_id=operator).exclude(status=SampleStatus.WAITING).delete()
    sample = OperatorSample.objects.create(run=run, operator_id=operator, requested_by=actor,
                                           request_id=f"sample-{uuid.uuid4().hex}")
    try:
        engine_gateway.control_sample(run_id=run.pk, operator=operator,
                                      request_id=sample.request_id)
    except REDIS_DOWN as error:
        sample.status, sample.reason = SampleStatus.FAILED, f"could not ask the driver: {error}"
        sample.save(update_fields=["status", "reason"])
        raise redis_down(error) from error
    return sample


def operator_sample_record(*, run_id: int, ack: engine_gateway.Ack) -> None:
    """Keep the driver's answer to a sample; only the first answer counts (a driver that
    took over the run sends again the acks of the epochs its predecessor ended, without
    their rows)."""
    if ack.status == "applied" and ack.sample is not None:
        answer: dict[str, Any] = {
            "status": SampleStatus.SERVED, "epoch": ack.applied_epoch,
            "columns": list(ack.sample.columns), "rows": [list(r) for r in ack.sample.rows]}
    else:
        answer = {"status": SampleStatus.FAILED, "reason": ack.reason or RESTARTED}
    OperatorSample.objects.filter(run_id=run_id, request_id=ack.request_id,
                                  status=SampleStatus.WAITING).update(
        served_at=timezone.now(), **answer)


def operator_sample_get(*, run_id: int | None = None, sample_id: int) -> OperatorSample:
    """The sample (of run ``run_id``, when given), or NotFound."""
    found = OperatorSample.objects.select_related("run").filter(pk=sample_id)
    if run_id is not None:
        found = found.filter(run_id=run_id)
    sample = found.first()
    if sample is None:
        raise NotFound(f"there is no data preview {sample_id}"
                       + (f" of run {run_id}" if run_id is not None else ""))
    return sample


def sample_as_json(sample: OperatorSample) -> dict[str, Any]:
    """The API's and the page's form: a waiting sample of a run that ended has failed."""
    status, reason = sample.status, sample.reason
    if status == SampleStatus.WAITING and sample.run.status not in SAMPLEABLE:
        status, reason = SampleStatus.FAILED, f"run {sample.run_id} is {sample.run.status}"
    return {
        "id": sample.pk, "run": sample.run_id, "operator": sample.operator_id,
        "status": status, "message": _message(sample, status, reason),
        "epoch": sample.epoch, "columns": sample.columns, "rows": sample.rows,
        "requested_at": sample.requested_at.isoformat(),
        "served_at": sample.served_at.isoformat() if sample.served_at else None,
    }


def _message(sample: OperatorSample, status: str, reason: str) -> str:
    operator = sample.operator_id
    if status == SampleStatus.WAITING:
        return f"waiting for the next epoch in which {operator} emits rows"
    if status == SampleStatus.FAILED:
        return f"no rows of {operator}: {reason}"
    if not sample.rows:
        return f"{operator} emitted no rows in the epochs up to {sample.epoch}"
    count = len(sample.rows)
    return f"{count} row{'s' if count != 1 else ''} {operator} emitted in epoch {sample.epoch}"
