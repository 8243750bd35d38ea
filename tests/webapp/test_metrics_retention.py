"""Bounded metrics storage: a run's per-epoch rows stay under the window's bound while its
totals survive in one-minute roll-ups, which themselves expire with the audit retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.db.models import Sum

from webapp.jobs.metrics import run_epoch_record
from webapp.jobs.models import OperatorEpoch, OperatorMinute, Run, RunEpoch, RunMinute
from webapp.jobs.retention import metrics_compact

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
WINDOW_S = 120


@pytest.fixture
def run(job):
    return Run.objects.create(job=job, version=job.versions.get(number=1),
                              spark_master="local[2]", checkpoint_location="/tmp/ckpt")


def _metrics(epoch: int) -> dict:
    return {
        "epoch": epoch, "batch_duration_ms": 400.0 + epoch % 7, "backlog_rows": epoch % 13,
        "latency_ms": {"p50": 50.0, "p99": 100.0 + epoch % 11, "max": 120.0},
        "operators": {
            "events": {"instances": 1, "rows_in": None, "rows_out": 100 + epoch % 5,
                       "output_rate": 100.0, "etp": 1.0},
            "counts": {"instances": 2 + epoch % 2, "rows_in": 50, "rows_out": 5,
                       "input_rate": 50.0, "processing_rate": 200.0, "output_rate": 5.0,
                       "congested": epoch % 4 == 0, "etp": 0.5},
        },
    }


def _simulate(run, *, seconds: int, every_s: int = 2, compact_every_s: int = 60) -> int:
    """A run writing one epoch every `every_s` while the beat compacts every minute; returns
    the most epoch rows the run ever held."""
    most = 0
    for t in range(0, seconds, every_s):
        at = T0 + timedelta(seconds=t)
        run_epoch_record(run_id=run.pk, metrics=_metrics(t // every_s), at=at,
                         sinks=frozenset({"counts"}))
        if t % compact_every_s == 0:
            metrics_compact(window_s=WINDOW_S, retention_days=365, now=at)
        most = max(most, RunEpoch.objects.filter(run=run).count())
    return most


def test_epoch_rows_stay_under_the_window_bound_and_totals_survive(run):
    seconds, every_s = 20 * 60, 2
    most = _simulate(run, seconds=seconds, every_s=every_s)
    # The window, plus the minute not yet whole and the one a beat period may add.
    bound = (WINDOW_S + 120) // every_s + 1
    assert most <= bound
    epochs = seconds // every_s
    assert most < epochs / 2  # without compaction the run would hold all of them
    assert OperatorEpoch.objects.filter(run=run).count() <= 2 * bound
    kept_in = RunEpoch.objects.filter(run=run).aggregate(s=Sum("rows_in"))["s"]
    rolled_in = RunMinute.objects.filter(run=run).aggregate(s=Sum("rows_in"))["s"]
    assert kept_in + rolled_in == sum(100 + e % 5 for e in range(epochs))
    minutes = RunMinute.objects.filter(run=run).order_by("minute")
    assert all(m.minute.second == 0 for m in minutes)
    assert sum(m.epochs for m in minutes) + RunEpoch.objects.filter(run=run).count() == epochs
    counts = OperatorMinute.objects.filter(run=run, operator_id="counts").order_by("minute")
    assert [m.epochs for m in counts][:3] == [30, 30, 30]
    assert counts[0].instances == 3 and counts[0].congested_epochs == 8


def test_compaction_twice_changes_nothing_and_keeps_the_latest_epoch(run):
    for e in range(5):
        run_epoch_record(run_id=run.pk, metrics=_metrics(e), at=T0 + timedelta(seconds=e))
    later = T0 + timedelta(hours=3)
    first = metrics_compact(window_s=WINDOW_S, retention_days=365, now=later)
    again = metrics_compact(window_s=WINDOW_S, retention_days=365, now=later)
    assert (first.epochs_rolled_up, again.epochs_rolled_up) == (4, 0)
    # The run's page shows its latest epoch, however old.
    assert list(RunEpoch.objects.filter(run=run).values_list("epoch", flat=True)) == [4]
    assert RunMinute.objects.get(run=run).epochs == 4


def test_minutes_past_the_audit_retention_are_deleted(run):
    for e in range(3):
        run_epoch_record(run_id=run.pk, metrics=_metrics(e), at=T0 + timedelta(seconds=e))
    metrics_compact(window_s=WINDOW_S, retention_days=1, now=T0 + timedelta(hours=2))
    assert RunMinute.objects.filter(run=run).count() == 1
    done = metrics_compact(window_s=WINDOW_S, retention_days=1, now=T0 + timedelta(days=2))
    assert done.minutes_deleted == 3  # the run's minute and its two operators' minutes
    assert not RunMinute.objects.filter(run=run).exists()


def test_the_beat_compacts_every_minute_with_the_configured_window():
    entry = settings.CELERY_BEAT_SCHEDULE["metrics-compact"]
    assert entry["task"] == "webapp.jobs.tasks.metrics_compact" and entry["schedule"] == 60.0
    assert settings.METRICS_FULL_RESOLUTION_S == 3600
