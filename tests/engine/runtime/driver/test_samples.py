"""A sample command on a real run: the driver answers with up to 20 rows an operator emitted in
the first epoch after it that emitted any, taken from that epoch's own output, while the run
goes on."""

from __future__ import annotations

import time

import pytest

from engine.runtime.control.messages import SAMPLE_ROWS, Ack, CommandRequest
from engine.runtime.driver.job_run import JobRun
from engine.runtime.driver.metrics import CollectingRecorder
from tests.engine.runtime.jobs import start_collected_run, wait_epoch, window_job

pytestmark = pytest.mark.spark


def _sample(run: JobRun, recorder: CollectingRecorder, operator: str, request_id: str) -> Ack:
    run.channel.send(CommandRequest(kind="sample", operator=operator, request_id=request_id,
                                    requested_at_ms=time.time() * 1000.0).to_message())
    ack = recorder.wait_for(request_id, timeout_s=60)
    assert ack is not None, f"no answer to the sample of {operator}"
    return ack


def _rows_of(ack: Ack) -> list[dict]:
    assert ack.status == "applied" and ack.sample is not None, ack
    return [dict(zip(ack.sample.columns, row, strict=True)) for row in ack.sample.rows]


def test_a_sample_brings_back_rows_each_operator_emitted_after_the_request(spark, tmp_path):
    job = window_job({"type": "sink.memory", "params": {}})
    run, _, recorder = start_collected_run(spark, tmp_path, job, last_epoch=40)
    try:
        wait_epoch(run, 1)
        views = _sample(run, recorder, "views", "s-views")
        rows = _rows_of(views)
        # The filter's own output: rows of the generator that passed its condition.
        assert len(rows) == SAMPLE_ROWS
        assert {"event_type", "campaign_id", "event_time"} <= set(views.sample.columns)
        assert {r["event_type"] for r in rows} == {"view"}
        assert views.applied_epoch is not None and views.applied_epoch >= 1
        assert not any(c.startswith("__") for c in views.sample.columns)

        # A window aggregate emits only when a window closes: its sample waits for that epoch.
        counts = _sample(run, recorder, "counts", "s-counts")
        windows = _rows_of(counts)
        assert 0 < len(windows) <= SAMPLE_ROWS
        assert list(counts.sample.columns) == [
            "campaign_id", "window_start", "window_end", "views", "users", "top"]
        assert all(w["views"] >= 1 and "T" in w["window_end"] for w in windows)
        # A sink's rows are those it wrote.
        written = _rows_of(_sample(run, recorder, "out", "s-out"))
        assert written and set(written[0]) == set(windows[0])

        ghost = _sample(run, recorder, "ghost", "s-ghost")
        assert ghost.status == "rejected" and ghost.reason == "unknown operator 'ghost'"
        # The run goes on after every sample.
        epoch = run.last_epoch
        wait_epoch(run, epoch + 2)
        assert run.failure() is None
    finally:
        run.stop()
