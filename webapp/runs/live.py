"""A run's epochs as they happen: stored for history, pushed to subscribers, and used to keep
the run's status, epoch and reconfiguration figures current."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from webapp.jobs.metrics import run_epoch_record
from webapp.jobs.models import Run, RunStatus
from webapp.live.events import job_event_send
from webapp.reconfigurations.services import reconfigurations_finish_due
from webapp.runs.services import run_status_set

# Per-operator fields sent live; everything else stays in the history tables.
LIVE_FIELDS = ("instances", "rows_in", "rows_out", "input_rate", "processing_rate",
               "output_rate", "congested", "etp", "busy", "demand_rate", "region")


def run_epoch_publish(*, run_id: int, metrics: dict[str, Any]) -> None:
    """Record one epoch's metrics and push them; a replayed epoch is not sent twice."""
    run = Run.objects.only("id", "job_id", "status", "target_dag").get(pk=run_id)
    at = timezone.now()
    if not run_epoch_record(run_id=run_id, metrics=metrics, at=at, sinks=_sinks(run)):
        return
    epoch = int(metrics["epoch"])
    Run.objects.filter(pk=run_id).update(current_epoch=epoch)
    if run.status in (RunStatus.STARTING, RunStatus.RECOVERING):
        run_status_set(run_id=run_id, status=RunStatus.RUNNING, epoch=epoch)
    job_event_send(job_id=run.job_id, event={
        "type": "run.epoch", "job": run.job_id, "run": run_id, "epoch": epoch,
        "metrics": live_metrics(metrics, at=at.timestamp()),
    })
    reconfigurations_finish_due(run_id=run_id, epoch=epoch)


def live_metrics(metrics: dict[str, Any], *, at: float) -> dict[str, Any]:
    """The compact form of an epoch for the wire: rounded numbers, no per-instance lists;
    ``wm`` holds each keyed operator's ``[watermark, behind the clock, behind the newest
    event]`` in ms, ``st`` its ``[state bytes read, state bytes written]``."""
    latency = metrics.get("latency_ms") or {}
    sources = (metrics.get("sources") or {}).values()
    regions = metrics.get("regions") or {}
    return {
        "t": round(at, 3),
        "d": _r(metrics.get("batch_duration_ms")),
        "backlog": metrics.get("backlog_rows", 0),
        "offered": _r(sum(s.get("offered_rate") or 0 for s in sources)) if sources else None,
        "growth": _r(sum(s.get("backlog_growth_per_s") or 0 for s in sources)) if sources else None,
        "bottleneck": metrics.get("bottleneck"),
        "lat": [_r(latency.get("p50")), _r(latency.get("p99")), _r(latency.get("max"))],
        "ops": {op_id: _compact(op, regions.get(op.get("region") or ""))
                for op_id, op in (metrics.get("operators") or {}).items()},
        "wm": {op_id: [_r(op.get("watermark_ms"), 0), _r(op.get("watermark_delay_ms"), 0),
                       _r(op.get("watermark_lag_ms"), 0)]
               for op_id, op in (metrics.get("operators") or {}).items()
               if op.get("watermark_delay_ms") is not None},
        "st": {op_id: [op.get("state_bytes_read"), op.get("state_bytes_written")]
               for op_id, op in (metrics.get("operators") or {}).items()
               if op.get("state_bytes_read") is not None},
        "broker": {op_id: {"lag": s.get("lag") or {}, "dl": s.get("dead_letters") or 0,
                           "sample": s.get("dead_letter_sample")}
                   for op_id, s in (metrics.get("broker_sources") or {}).items()},
    }


def _compact(op: dict[str, Any], region: dict[str, Any] | None) -> list[Any]:
    """An operator's live values; inside a fused region, busy time and true rate are the
    region's (labelled so on the page), never a per-operator copy."""
    measured = region if region is not None else op
    busy = measured.get("busy_ms") or []
    return [op.get("instances"), op.get("rows_in"), op.get("rows_out"), _r(op.get("input_rate")),
            _r(measured.get("processing_rate")), _r(op.get("output_rate")),
            bool(op.get("congested")), _r(op.get("etp"), 3), _r(max(busy) if busy else None),
            _r(op.get("demand_rate")), op.get("region")]


def _r(value: Any, digits: int = 1) -> Any:
    return None if value is None else round(float(value), digits)


def _sinks(run: Run) -> frozenset[str]:
    document = run.target_dag or {}
    parents = {edge["from"] for edge in document.get("edges", [])}
    return frozenset(op["id"] for op in document.get("operators", []) if op["id"] not in parents)
