"""source.redis_stream and source.nats on the embedded servers: a rescale while reading two
streams keeps the windows exact."""

from __future__ import annotations

import uuid

import pytest

from engine.runtime.api import request_reconfiguration, start_run
from engine.runtime.driver.metrics import CollectingPublisher, CollectingRecorder
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_rows
from tests.engine.runtime.broker_jobs import sink_windows
from tests.engine.runtime.brokers import Broker, any_broker_fixture  # noqa: F401
from tests.engine.runtime.jobs import wait_epoch

pytestmark = pytest.mark.spark


def test_rescale_while_reading_two_streams_stays_exact(spark, tmp_path, any_broker: Broker) -> None:  # type: ignore[no-untyped-def]
    streams = any_broker.streams
    cap = 800  # 400 from each stream per epoch: both streams advance through event time together
    total, last = any_broker.fill_for_run(streams, 3000, cap)
    sink = f"{any_broker.name}_{uuid.uuid4().hex[:6]}"
    publisher, recorder = CollectingPublisher(), CollectingRecorder()
    memory = {"type": "sink.memory", "params": {"name": sink}}
    run = start_run(any_broker.job(streams, cap, memory), checkpoint=str(tmp_path / "ckpt"),
                    publisher=publisher, recorder=recorder, spark=spark, trigger_ms=0,
                    stop_after_epoch=last)
    for epoch, parallelism in ((1, 4), (4, 1)):
        wait_epoch(run, epoch)
        request = request_reconfiguration(run.channel, kind="rescale", operator="counts",
                                          parallelism=parallelism)
        ack = recorder.wait_for(request, timeout_s=60)
        assert ack is not None and ack.status == "applied", ack
    assert run.wait(240) == "stopped", run.failure()
    assert {1, 2, 4} <= {e["operators"]["counts"]["instances"] for e in publisher.epochs}
    assert sum(e["operators"]["events"]["rows_out"] for e in publisher.epochs) == total
    assert sink_windows(memory_sink_rows(sink)) == any_broker.expected_windows(streams, 3000)
    clear_memory_sink(sink)
