"""A run whose sources are all clock sources runs its epochs from the driver's own loop:
epochs start on the run's interval, at once when a command arrives, and a restart resumes
from the epoch log; no Spark streaming query runs for it."""

from __future__ import annotations

import os
import threading
import time
import uuid

import pytest

from engine.runtime.api import request_reconfiguration, start_run
from engine.runtime.control.epoch_plan import EpochOutcome, EpochPlan
from engine.runtime.driver.epoch_log import EpochLog
from engine.runtime.driver.loop import EpochPacer, first_epoch
from engine.runtime.driver.metrics import CollectingPublisher, CollectingRecorder
from engine.runtime.io.sinks import clear_memory_sink
from tests.engine.runtime.jobs import wait_epoch, window_job


def _waited(pacer: EpochPacer) -> float:
    started = time.monotonic()
    assert pacer.wait()
    return time.monotonic() - started


def test_the_pacer_starts_an_epoch_per_interval_and_at_once_when_woken() -> None:
    pacer = EpochPacer(300)
    assert _waited(pacer) < 0.05  # the first epoch starts at once
    assert 0.25 < _waited(pacer) < 0.4  # the next one an interval later
    pacer.wake()
    assert _waited(pacer) < 0.05  # woken: at once
    # The epoch woken early does not move the grid: the next one is where it was due.
    assert 0.2 < _waited(pacer) < 0.35


def test_an_epoch_that_ran_past_the_next_start_is_followed_at_once_then_the_grid() -> None:
    pacer = EpochPacer(200)
    pacer.wait()
    time.sleep(0.25)  # the epoch ran past the next start (0.2 s)
    assert _waited(pacer) < 0.05
    assert 0.1 < _waited(pacer) < 0.2  # back on the grid: due at 0.4 s


def test_back_to_back_the_pacer_never_waits_and_a_close_ends_a_wait() -> None:
    assert max(_waited(EpochPacer(0)) for _ in range(3)) < 0.05
    pacer = EpochPacer(10_000)
    pacer.wait()
    ended: list[bool] = []
    waiting = threading.Thread(target=lambda: ended.append(pacer.wait()))
    waiting.start()
    time.sleep(0.05)
    pacer.close()
    waiting.join(1.0)
    assert ended == [False] and pacer.wait() is False


def test_a_run_starts_with_its_last_epoch_without_an_outcome_else_the_next(tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = EpochLog(str(tmp_path / "epochs"))
    assert first_epoch(log) == 0
    log.write_plan(_empty_plan(0))
    assert first_epoch(log) == 0  # planned, not done: it runs again
    log.write_outcome(0, EpochOutcome())
    log.write_plan(_empty_plan(1))
    assert first_epoch(log) == 1
    log.write_outcome(1, EpochOutcome())
    assert first_epoch(log) == 2


def _empty_plan(epoch: int) -> EpochPlan:
    return EpochPlan(epoch=epoch, config={}, sources={}, watermarks={}, closes={}, cursor=None)


@pytest.mark.spark
def test_a_clock_run_has_no_spark_query_and_reports_each_epoch(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sink = f"sink_{uuid.uuid4().hex[:8]}"
    job = window_job({"type": "sink.memory", "params": {"name": sink}}, parallelism=2)
    checkpoint = str(tmp_path / "ckpt")
    run = start_run(job, checkpoint=checkpoint, publisher=CollectingPublisher(), spark=spark,
                    epoch_ms=1000, trigger_ms=0, stop_after_epoch=3)
    try:
        wait_epoch(run, 1)
        assert not [q for q in spark.streams.active if "streamscale" in (q.name or "")]
        assert run.wait(timeout_s=120) == "stopped"
    finally:
        run.stop()
    assert [p["batchId"] for p in run.progress()] == [0, 1, 2, 3]
    assert all(p["durationMs"]["triggerExecution"] > 0 for p in run.progress())
    assert not os.path.exists(os.path.join(checkpoint, "spark"))
    # Restarted, it resumes after the last epoch done, from its epoch log.
    again = start_run(job, checkpoint=checkpoint, publisher=CollectingPublisher(), spark=spark,
                      epoch_ms=1000, trigger_ms=0, stop_after_epoch=5)
    try:
        assert again.wait(timeout_s=120) == "stopped"
    finally:
        again.stop()
    assert [p["batchId"] for p in again.progress()] == [4, 5]
    clear_memory_sink(sink)


@pytest.mark.spark
def test_a_command_between_epochs_takes_effect_in_an_epoch_that_starts_at_once(
    spark, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    sink = f"sink_{uuid.uuid4().hex[:8]}"
    job = window_job({"type": "sink.memory", "params": {"name": sink}}, parallelism=1)
    publisher, recorder = CollectingPublisher(), CollectingRecorder()
    interval_ms = 5000
    run = start_run(job, checkpoint=str(tmp_path / "ckpt"), publisher=publisher,
                    recorder=recorder, spark=spark, epoch_ms=interval_ms)
    try:
        wait_epoch(run, 3)  # past the start-up epochs, which run late and catch up
        time.sleep(0.3)  # between epochs: the next is due seconds from now
        up = request_reconfiguration(run.channel, kind="rescale", operator="counts",
                                     parallelism=2)
        ack = recorder.wait_for(up, 60)
        wait_epoch(run, ack.applied_epoch + 1)
    finally:
        run.stop()
    assert ack.status == "applied" and run.parallelism()["counts"] == 2
    epochs = {m["epoch"]: m for m in publisher.epochs}
    applied, before = epochs[ack.applied_epoch], epochs[ack.applied_epoch - 1]
    started_ms = ack.epoch_ended_at_ms - applied["batch_duration_ms"]
    before_ended_ms = started_ms - applied["interval_ms"] + before["batch_duration_ms"]
    # The epoch that applied the change started as soon as the command was picked up (or
    # the epoch it arrived in ended), not at the run's next interval.
    waited_ms = started_ms - max(ack.picked_up_at_ms, before_ended_ms)
    assert waited_ms < 500, f"the change's epoch waited {waited_ms:.0f} ms to start"
    assert applied["interval_ms"] < interval_ms - 1000
    # The epochs not woken keep the run's grid: the one after the woken epoch starts where
    # it was due, an interval after the epoch before the woken one, or as soon as the woken
    # epoch ended if that ran past it.
    after = epochs[ack.applied_epoch + 1]
    due_ms = max(interval_ms - applied["interval_ms"], applied["batch_duration_ms"])
    assert -300 < after["interval_ms"] - due_ms < 500, (applied, after["interval_ms"])
    clear_memory_sink(sink)
