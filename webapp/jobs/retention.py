"""Bounded metrics storage: per-epoch rows for a window, one-minute roll-ups after that.

A run writes about one `RunEpoch` and one `OperatorEpoch` per operator every second. The beat
calls `metrics_compact` every minute: rows older than the full-resolution window
(`METRICS_FULL_RESOLUTION_S`, 1 h by default) are folded into `RunMinute` / `OperatorMinute`
rows and deleted in the same statement, so nothing is counted twice or lost if it stops half-way.
A run's latest epoch is kept whatever its age: it is what the run's page and API show.
Roll-ups older than the audit retention (`AUDIT_RETENTION_DAYS`) are deleted.

So a run holds at most (window / epoch interval + 1) epoch rows, plus one roll-up row per minute
of the retention period.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from webapp.jobs.models import OperatorMinute, RunEpoch, RunMinute

# Both rollups first take the run's epochs older than the cutoff (but its last epoch) out of
# their table, then sum them into their minutes.
_GONE = """
WITH gone AS (
    DELETE FROM {table}
    WHERE run_id = %(run)s AND recorded_at < %(cutoff)s AND epoch < %(last)s
    RETURNING *
)"""

RUN_ROLLUP_SQL = _GONE.format(table="jobs_runepoch") + """
INSERT INTO jobs_runminute AS m (run_id, minute, epochs, rows_in, rows_out, batch_duration_ms,
                                 backlog_rows, latency_p99_ms, latency_max_ms)
SELECT run_id, date_trunc('minute', recorded_at), count(*), sum(rows_in), sum(rows_out),
       avg(batch_duration_ms), max(backlog_rows), max(latency_p99_ms), max(latency_max_ms)
FROM gone GROUP BY run_id, date_trunc('minute', recorded_at)
ON CONFLICT (run_id, minute) DO UPDATE SET
    epochs = m.epochs + EXCLUDED.epochs,
    rows_in = m.rows_in + EXCLUDED.rows_in,
    rows_out = m.rows_out + EXCLUDED.rows_out,
    batch_duration_ms = (m.batch_duration_ms * m.epochs
                         + EXCLUDED.batch_duration_ms * EXCLUDED.epochs)
                        / (m.epochs + EXCLUDED.epochs),
    backlog_rows = greatest(m.backlog_rows, EXCLUDED.backlog_rows),
    latency_p99_ms = greatest(m.latency_p99_ms, EXCLUDED.latency_p99_ms),
    latency_max_ms = greatest(m.latency_max_ms, EXCLUDED.latency_max_ms)
"""

OPERATOR_ROLLUP_SQL = _GONE.format(table="jobs_operatorepoch") + """
INSERT INTO jobs_operatorminute AS m (run_id, operator_id, minute, epochs, instances, rows_in,
                                      rows_out, input_rate, processing_rate, output_rate,
                                      congested_epochs, etp)
SELECT run_id, operator_id, date_trunc('minute', recorded_at), count(*), max(instances),
       sum(rows_in), sum(rows_out), avg(input_rate), avg(processing_rate), avg(output_rate),
       count(*) FILTER (WHERE congested), avg(etp)
FROM gone GROUP BY run_id, operator_id, date_trunc('minute', recorded_at)
ON CONFLICT (run_id, operator_id, minute) DO UPDATE SET
    epochs = m.epochs + EXCLUDED.epochs,
    instances = greatest(m.instances, EXCLUDED.instances),
    rows_in = m.rows_in + EXCLUDED.rows_in,
    rows_out = m.rows_out + EXCLUDED.rows_out,
    input_rate = (m.input_rate * m.epochs + EXCLUDED.input_rate * EXCLUDED.epochs)
                 / (m.epochs + EXCLUDED.epochs),
    processing_rate = (m.processing_rate * m.epochs + EXCLUDED.processing_rate * EXCLUDED.epochs)
                      / (m.epochs + EXCLUDED.epochs),
    output_rate = (m.output_rate * m.epochs + EXCLUDED.output_rate * EXCLUDED.epochs)
                  / (m.epochs + EXCLUDED.epochs),
    congested_epochs = m.congested_epochs + EXCLUDED.congested_epochs,
    etp = (m.etp * m.epochs + EXCLUDED.etp * EXCLUDED.epochs) / (m.epochs + EXCLUDED.epochs)
"""


@dataclass(frozen=True)
class Compaction:
    """What one pass did: epoch rows folded into minutes, and old minute rows deleted."""

    runs: int
    epochs_rolled_up: int
    minutes_deleted: int


def metrics_compact(
    *, window_s: int, retention_days: int, now: datetime | None = None
) -> Compaction:
    """Fold epochs older than `window_s` into minutes; drop minutes older than the retention."""
    now = now or timezone.now()
    # Whole minutes only: a minute's epochs are folded in one pass, never split across two.
    cutoff = (now - timedelta(seconds=window_s)).replace(second=0, microsecond=0)
    runs = list(RunEpoch.objects.filter(recorded_at__lt=cutoff)
                .values_list("run_id", flat=True).distinct())
    rolled = 0
    for run_id in runs:
        rolled += _compact_run(run_id, cutoff)
    horizon = now - timedelta(days=retention_days)
    with transaction.atomic():
        deleted = RunMinute.objects.filter(minute__lt=horizon).delete()[0]
        deleted += OperatorMinute.objects.filter(minute__lt=horizon).delete()[0]
    return Compaction(runs=len(runs), epochs_rolled_up=rolled, minutes_deleted=deleted)


def _compact_run(run_id: int, cutoff: datetime) -> int:
    """One run's pass, in one transaction; returns how many epoch rows it folded."""
    with transaction.atomic():
        last = RunEpoch.objects.filter(run_id=run_id).aggregate(m=Max("epoch"))["m"]
        if last is None:
            return 0
        params = {"run": run_id, "cutoff": cutoff, "last": last}
        before = RunEpoch.objects.filter(run_id=run_id).count()
        with connection.cursor() as cursor:
            cursor.execute(RUN_ROLLUP_SQL, params)
            cursor.execute(OPERATOR_ROLLUP_SQL, params)
        return before - RunEpoch.objects.filter(run_id=run_id).count()
