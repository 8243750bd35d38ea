"""The control path never stops the data path: while the host refuses every ack and metric
write (a database that is down), epochs go on at their pace, a command still applies, a
later stop is still picked up, and everything (a malformed command's rejection too) reaches
the host once it is back."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from engine.runtime.api import request_reconfiguration, start_run
from engine.runtime.control.messages import Ack
from engine.runtime.driver.epoch_log import EpochLog
from engine.runtime.driver.metrics import CollectingPublisher, CollectingRecorder
from engine.runtime.io.sinks import clear_memory_sink
from tests.engine.runtime.jobs import wait_epoch, window_job
from tests.waiting import wait_for

pytestmark = pytest.mark.spark


class Outage:
    """Refuses every call until ``end()``; counts the refusals."""

    def __init__(self) -> None:
        self.down, self.refused = True, 0

    def check(self) -> None:
        if self.down:
            self.refused += 1
            raise ConnectionError("could not connect to server: Connection refused")


class RefusingRecorder(CollectingRecorder):
    def __init__(self, outage: Outage) -> None:
        super().__init__()
        self.outage = outage

    def acknowledge(self, run_id: str, ack: Ack) -> None:
        self.outage.check()
        super().acknowledge(run_id, ack)


class RefusingPublisher(CollectingPublisher):
    def __init__(self, outage: Outage) -> None:
        super().__init__()
        self.outage = outage

    def publish_epoch(self, run_id: str, epoch_metrics: dict[str, Any]) -> None:
        self.outage.check()
        super().publish_epoch(run_id, epoch_metrics)


def test_a_host_outage_neither_fails_nor_slows_epochs_and_stop_still_works(
    spark, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    sink = f"sink_{uuid.uuid4().hex[:8]}"
    job = window_job({"type": "sink.memory", "params": {"name": sink}}, parallelism=2)
    outage = Outage()
    publisher, recorder = RefusingPublisher(outage), RefusingRecorder(outage)
    run = start_run(job, checkpoint=str(tmp_path / "ckpt"), publisher=publisher,
                    recorder=recorder, spark=spark, epoch_ms=1000, trigger_ms=0)
    while (run.last_epoch or 0) < 1:  # (wait_epoch would wait for the host too)
        assert run.failure() is None
        time.sleep(0.05)
    up = request_reconfiguration(run.channel, kind="rescale", operator="counts", parallelism=3)
    run.channel.send({"request_id": "malformed", "kind": "explode"})
    wait_for(lambda: run.parallelism()["counts"] == 3, timeout=60, what="the rescale")
    during = run.last_epoch
    stop = request_reconfiguration(run.channel, kind="stop")
    wait_for(lambda: _stop_planned(run.log), timeout=60,
               what="an epoch planned to stop the run")
    assert run.failure() is None
    assert outage.refused > 0 and recorder.acks == [] and publisher.epochs == []
    outage.down = False
    assert run.wait(120) == "stopped"
    acks = {a.request_id: a for a in recorder.acks}
    assert acks[up].status == "applied" and acks["malformed"].status == "rejected"
    assert acks[stop].status == "applied" and run.last_epoch >= (during or 0)
    assert [m["epoch"] for m in publisher.epochs] == list(range(run.last_epoch + 1))
    clear_memory_sink(sink)


def _stop_planned(log: EpochLog) -> bool:
    plan = log.latest_plan(before=2**62)
    return plan is not None and plan.stop


def test_acks_say_when_the_first_epoch_at_the_new_parallelism_ended(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sink = f"sink_{uuid.uuid4().hex[:8]}"
    job = window_job({"type": "sink.memory", "params": {"name": sink}}, parallelism=2)
    publisher, recorder = CollectingPublisher(), CollectingRecorder()
    run = start_run(job, checkpoint=str(tmp_path / "ckpt"), publisher=publisher,
                    recorder=recorder, spark=spark, epoch_ms=1000, trigger_ms=0,
                    stop_after_epoch=6)
    wait_epoch(run, 1)
    sent_ms = time.time() * 1000.0
    up = request_reconfiguration(run.channel, kind="rescale", operator="counts", parallelism=4)
    ack = recorder.wait_for(up, 60)
    assert run.wait(120) == "stopped"
    applied = next(m for m in publisher.epochs if m["epoch"] == ack.applied_epoch)
    assert applied["operators"]["counts"]["instances"] == 4
    assert sent_ms < ack.picked_up_at_ms < ack.epoch_ended_at_ms <= time.time() * 1000.0
    clear_memory_sink(sink)
