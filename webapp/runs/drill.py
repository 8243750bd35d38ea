"""One operator of a run over time, for the run page's drill-down: its rates in and out, the
busy share of each instance, and for a keyed operator its watermark lag and the state bytes
its instances read and wrote, column-wise and oldest first. Inside a fused region, busy time
is the region's (Spark runs it as one stage) and is labelled so.

Not recorded per operator, so not offered: latency (measured end to end, event time to sink
commit) and state size (the store reports bytes read and written per epoch, not bytes held)."""

from __future__ import annotations

from typing import Any

from webapp.errors import NotFound
from webapp.jobs.models import OperatorEpoch, Run, RunEpoch

SERIES_EPOCHS = 600


def operator_series(*, run: Run, operator_id: str, since_epoch: int | None = None,
                    limit: int = SERIES_EPOCHS) -> dict[str, Any]:
    """The operator's last ``limit`` epochs after ``since_epoch``; NotFound naming it when
    the run's graph has no such operator."""
    document = run.target_dag or run.version.dag
    operator = next((op for op in document.get("operators", []) if op["id"] == operator_id),
                    None)
    if operator is None:
        raise NotFound(f"run {run.pk} has no operator {operator_id!r}")
    rows = OperatorEpoch.objects.filter(run=run, operator_id=operator_id)
    if since_epoch is not None:
        rows = rows.filter(epoch__gt=since_epoch)
    rows = list(rows.order_by("-epoch")[:limit])[::-1]
    loads = {epoch: (load or {}, batch_ms) for epoch, load, batch_ms in RunEpoch.objects.filter(
        run=run, epoch__in=[r.epoch for r in rows]).values_list(
        "epoch", "load", "batch_duration_ms")}
    epochs = [_epoch_figures(row, *loads.get(row.epoch, ({}, None))) for row in rows]
    width = max([len(e["busy"]) for e in epochs] + [0])
    return {
        "operator": {"id": operator_id, "type": operator["type"]},
        "epoch": [r.epoch for r in rows],
        "t": [round(r.recorded_at.timestamp(), 3) for r in rows],
        "instances": [r.instances for r in rows],
        "in": [r.input_rate for r in rows],
        "out": [r.output_rate for r in rows],
        "busy": [[e["busy"][i] if i < len(e["busy"]) else None for e in epochs]
                 for i in range(width)],
        "region": next((e["region"] for e in reversed(epochs) if e["region"]), None),
        "watermark_lag": [e["watermark_lag"] for e in epochs],
        "state_read": [e["state_read"] for e in epochs],
        "state_written": [e["state_written"] for e in epochs],
    }


def _epoch_figures(row: OperatorEpoch, load: dict[str, Any],
                   batch_ms: float | None) -> dict[str, Any]:
    """Busy share per instance (of the epoch's interval) and the keyed figures of one epoch."""
    op = (load.get("operators") or {}).get(row.operator_id) or {}
    region = op.get("region")
    measured = (load.get("regions") or {}).get(region) if region else None
    busy = (measured or {}).get("busy_ms") if measured else row.busy_ms
    interval = load.get("interval_ms") or batch_ms
    return {
        "region": region if measured else None,
        "busy": [round(100 * b / interval, 1) if interval and b is not None else None
                 for b in busy or []],
        "watermark_lag": op.get("watermark_delay_ms"),
        "state_read": op.get("state_bytes_read"),
        "state_written": op.get("state_bytes_written"),
    }

