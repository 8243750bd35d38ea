"""Per-epoch metrics storage: one row per (run, epoch) and per (run, epoch, operator), indexed
by time so that range queries and roll-ups into time buckets stay cheap."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from webapp.jobs.models import OperatorEpoch, RunEpoch


def run_epoch_record(
    *, run_id: int, metrics: dict[str, Any], at: datetime | None = None,
    sinks: frozenset[str] = frozenset(),
) -> bool:
    """Store one epoch's metrics as the driver publishes them; a replayed epoch is ignored.

    The run's rows in are what its sources emitted (operators with no input count); its rows
    out are what reached `sinks`. Returns whether the epoch was new.
    """
    at = at or timezone.now()
    latency = metrics.get("latency_ms") or {}
    operators = metrics.get("operators") or {}
    sources = [op for op in operators.values() if op.get("rows_in") is None]
    with transaction.atomic():
        _, created = RunEpoch.objects.get_or_create(
            run_id=run_id,
            epoch=metrics["epoch"],
            defaults={
                "recorded_at": at,
                "batch_duration_ms": metrics.get("batch_duration_ms") or 0.0,
                "backlog_rows": metrics.get("backlog_rows") or 0,
                "rows_in": sum(op.get("rows_out") or 0 for op in sources),
                "rows_out": sum(operators[s].get("rows_out") or 0 for s in sinks
                                if s in operators),
                "latency_p50_ms": latency.get("p50"),
                "latency_p99_ms": latency.get("p99"),
                "latency_max_ms": latency.get("max"),
                "broker": metrics.get("broker_sources") or {},
                "load": epoch_load(metrics),
            },
        )
        if created:
            OperatorEpoch.objects.bulk_create(
                [_operator_row(run_id, metrics["epoch"], at, op_id, op)
                 for op_id, op in operators.items()]
            )
    return created


LOAD_OPERATOR_FIELDS = ("instances", "rows_in", "rows_out", "busy_ms", "region", "demand_rate")
# Kept with the load for the run's pages: a keyed operator's rows per instance, its
# event-time progress and the state bytes its instances read and wrote in the store that
# epoch (None for the others).
KEYED_OPERATOR_FIELDS = ("rows_in_per_instance", "watermark_ms", "max_event_ms",
                         "watermark_delay_ms", "watermark_lag_ms", "state_bytes_read",
                         "state_bytes_written")


def epoch_load(metrics: dict[str, Any]) -> dict[str, Any]:
    """The part of an epoch's metrics the load model reads (``engine.policies.load``)."""
    return {
        "epoch": metrics["epoch"],
        "interval_ms": metrics.get("interval_ms"),
        "driver_epoch": metrics.get("driver_epoch"),
        "session_epoch": metrics.get("session_epoch"),
        "sources": metrics.get("sources") or {},
        "regions": metrics.get("regions") or {},
        "bottleneck": metrics.get("bottleneck"),
        "operators": {op_id: _load_operator(op)
                      for op_id, op in (metrics.get("operators") or {}).items()},
    }


def _load_operator(op: dict[str, Any]) -> dict[str, Any]:
    kept = {name: op.get(name) for name in LOAD_OPERATOR_FIELDS}
    kept.update({name: op[name] for name in KEYED_OPERATOR_FIELDS if op.get(name) is not None})
    return kept


def _operator_row(run_id: int, epoch: int, at: datetime, op_id: str, op: dict) -> OperatorEpoch:
    return OperatorEpoch(
        run_id=run_id, epoch=epoch, operator_id=op_id, recorded_at=at,
        instances=op.get("instances") or 1, rows_in=op.get("rows_in") or 0,
        rows_out=op.get("rows_out") or 0, busy_ms=op.get("busy_ms") or [],
        input_rate=op.get("input_rate"), processing_rate=op.get("processing_rate"),
        output_rate=op.get("output_rate"), congested=bool(op.get("congested")), etp=op.get("etp"),
    )


ROLLUP_SQL = """
SELECT date_bin(make_interval(secs => %(bucket)s), recorded_at, %(origin)s) AS bucket,
       operator_id,
       count(*) AS epochs,
       sum(rows_in) AS rows_in,
       sum(rows_out) AS rows_out,
       avg(output_rate) AS output_rate,
       avg(processing_rate) AS processing_rate,
       avg(etp) AS etp,
       max(instances) AS instances
FROM jobs_operatorepoch
WHERE run_id = %(run)s AND recorded_at >= %(since)s AND recorded_at < %(until)s
GROUP BY bucket, operator_id
ORDER BY bucket, operator_id
"""

_ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)


def operator_rollup(
    *, run_id: int, since: datetime, until: datetime, bucket_seconds: int
) -> list[dict[str, Any]]:
    """Per-operator figures rolled up into buckets of `bucket_seconds` between since and until."""
    if bucket_seconds < 1:
        raise ValueError("bucket_seconds must be at least 1")
    params = {"bucket": bucket_seconds, "origin": _ORIGIN, "run": run_id,
              "since": since, "until": until}
    with connection.cursor() as cursor:
        cursor.execute(ROLLUP_SQL, params)
        columns = [c.name for c in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
