"""One driver per run: a driver takes the run's next fencing generation as it starts, and a
driver left behind (a zombie) stops at its next epoch without committing it once a later
one has started. The generation lives in the run's Redis, beside its control channel."""

from __future__ import annotations

import uuid

import pytest

from engine.runtime.api import start_run
from engine.runtime.control.channel import RedisControlChannel
from engine.runtime.driver.metrics import CollectingPublisher
from engine.runtime.errors import DriverSuperseded
from tests.engine.runtime.jobs import generator, wait_epoch

pytestmark = pytest.mark.spark


def _job() -> dict:
    return {"name": "fenced", "key_groups": 4,
            "operators": [generator(),
                          {"id": "out", "type": "sink.memory", "params": {}}],
            "edges": [{"from": "events", "to": "out"}]}


def test_a_superseded_driver_stops_before_its_next_epoch(spark, tmp_path, redis_url) -> None:  # type: ignore[no-untyped-def]
    prefix = f"sstest-{uuid.uuid4().hex[:8]}:"
    publisher = CollectingPublisher()
    run = start_run(_job(), checkpoint=str(tmp_path / "ckpt"), publisher=publisher,
                    spark=spark, run_id="fenced", control_url=redis_url,
                    control_prefix=prefix, epoch_ms=500, trigger_ms=0)
    channel = RedisControlChannel(redis_url, "fenced", prefix)
    try:
        assert run.generation == channel.newest_generation() == 1
        wait_epoch(run, 1)
        successor = channel.take_generation()  # as a successor driver's start takes it
        assert successor == 2
        assert run.wait(60) == "failed"
        assert isinstance(run.error, DriverSuperseded) or "DriverSuperseded" in str(run.error)
        assert "driver generation 1 is superseded by generation 2" in str(run.error)
        last = run.last_epoch
        run.flush()
        assert max(e["epoch"] for e in publisher.epochs) == last  # nothing after the fence
    finally:
        if run.status not in ("stopped", "failed"):
            run.stop()
        channel.delete()
