"""Per-epoch metrics: stored once per epoch, queried by time range and rolled up into buckets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.webapp.conftest import operator_figures, published_epoch
from webapp.jobs.metrics import operator_rollup, run_epoch_record
from webapp.jobs.models import OperatorEpoch, Run, RunEpoch

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def run(job):
    return Run.objects.create(
        job=job,
        version=job.versions.get(number=1),
        spark_master="local[2]",
        checkpoint_location="/tmp/ckpt",
    )


def _metrics(epoch: int, rows: int, instances: int = 2) -> dict:
    return published_epoch(epoch, {
        "events": operator_figures(
            rows_in=None, rows_out=rows, busy_ms=[1.0], input_rate=None, processing_rate=None,
            output_rate=rows),
        "clicks": operator_figures(
            instances=instances, rows_in=rows, rows_out=rows // 2, busy_ms=[100.0] * instances,
            input_rate=rows, processing_rate=2.0 * rows, output_rate=rows / 2),
    }, batch_ms=500.0, latency=(100.0, 250.0, 300.0))


def test_an_epoch_is_recorded_once(run):
    sinks = frozenset({"clicks"})
    assert run_epoch_record(run_id=run.pk, metrics=_metrics(0, 100), at=T0, sinks=sinks) is True
    assert run_epoch_record(run_id=run.pk, metrics=_metrics(0, 999), at=T0, sinks=sinks) is False
    stored = RunEpoch.objects.get(run=run, epoch=0)
    assert (stored.rows_in, stored.rows_out) == (100, 50)
    assert OperatorEpoch.objects.filter(run=run).count() == 2


def test_rollup_sums_epochs_into_time_buckets(run):
    for i in range(12):  # one epoch every 10 s for two minutes
        run_epoch_record(
            run_id=run.pk,
            metrics=_metrics(i, 100 + i, instances=2 + i // 6),
            at=T0 + timedelta(seconds=10 * i),
        )
    buckets = [
        b
        for b in operator_rollup(
            run_id=run.pk, since=T0, until=T0 + timedelta(minutes=2), bucket_seconds=60
        )
        if b["operator_id"] == "clicks"
    ]
    assert [b["epochs"] for b in buckets] == [6, 6]
    assert buckets[0]["rows_in"] == sum(100 + i for i in range(6))
    assert buckets[1]["rows_in"] == sum(100 + i for i in range(6, 12))
    assert [b["instances"] for b in buckets] == [2, 3]
    narrow = [
        b
        for b in operator_rollup(
            run_id=run.pk,
            since=T0 + timedelta(seconds=30),
            until=T0 + timedelta(seconds=60),
            bucket_seconds=60,
        )
        if b["operator_id"] == "clicks"
    ]
    assert narrow[0]["epochs"] == 3


def test_rollup_refuses_an_empty_bucket(run):
    with pytest.raises(ValueError, match="bucket_seconds"):
        operator_rollup(run_id=run.pk, since=T0, until=T0, bucket_seconds=0)
