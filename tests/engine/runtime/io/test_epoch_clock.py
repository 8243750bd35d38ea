"""The epoch clock starts an epoch when the run's interval has passed, or at once when a
control command arrives, so a change takes effect without waiting for the next interval."""

from __future__ import annotations

import time
import uuid

import pytest

from engine.runtime.api import request_reconfiguration, start_run
from engine.runtime.driver.metrics import CollectingPublisher, CollectingRecorder
from engine.runtime.io.epoch_clock import ClockReader, Waker
from engine.runtime.io.sinks import clear_memory_sink
from tests.engine.runtime.jobs import wait_epoch, window_job


def _ticks(reader: ClockReader, start: dict) -> dict:
    rows, end = reader.read(start)
    assert list(rows) == ([] if end == start else [(end["tick"],)])
    return end


def test_a_paced_clock_ticks_once_per_interval_and_at_once_when_woken(tmp_path) -> None:  # type: ignore[no-untyped-def]
    waker = Waker(str(tmp_path / "wake"))
    reader = ClockReader(300, waker.path)
    first = _ticks(reader, reader.initialOffset())
    assert first == {"tick": 1}  # the first epoch starts at once
    assert _ticks(reader, first) == first  # not due yet: no batch
    waker.wake()
    second = _ticks(reader, first)
    assert second == {"tick": 2}
    assert _ticks(reader, second) == second  # one wake, one epoch
    time.sleep(0.35)
    assert _ticks(reader, second) == {"tick": 3}
    assert list(reader.readBetweenOffsets(first, second)) == [(2,)]


def test_an_unpaced_clock_ticks_at_every_batch_and_reads_an_older_offset() -> None:
    reader = ClockReader(0, "")
    assert _ticks(reader, {"offset": 7, "timestamp": 0}) == {"tick": 1}
    assert _ticks(reader, {"tick": 1}) == {"tick": 2}


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
        ack = run.channel.wait_for_ack(up, 60)
        wait_epoch(run, ack["applied_epoch"] + 1)
    finally:
        run.stop()
    assert ack["status"] == "applied" and run.parallelism()["counts"] == 2
    epochs = {m["epoch"]: m for m in publisher.epochs}
    applied, before = epochs[ack["applied_epoch"]], epochs[ack["applied_epoch"] - 1]
    started_ms = ack["epoch_ended_at_ms"] - applied["batch_duration_ms"]
    before_ended_ms = started_ms - applied["interval_ms"] + before["batch_duration_ms"]
    # The epoch that applied the change started as soon as the command was picked up (or
    # the epoch it arrived in ended), not at the run's next interval.
    waited_ms = started_ms - max(ack["picked_up_at_ms"], before_ended_ms)
    assert waited_ms < 500, f"the change's epoch waited {waited_ms:.0f} ms to start"
    assert applied["interval_ms"] < interval_ms - 1000
    # The epochs not woken keep the run's grid: the one after the woken epoch starts where
    # it was due, an interval after the epoch before the woken one, or as soon as the woken
    # epoch ended if that ran past it.
    after = epochs[ack["applied_epoch"] + 1]
    due_ms = max(interval_ms - applied["interval_ms"], applied["batch_duration_ms"])
    assert -300 < after["interval_ms"] - due_ms < 500, (applied, after["interval_ms"])
    clear_memory_sink(sink)
