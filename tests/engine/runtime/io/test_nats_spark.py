"""source.nats on the embedded NATS: exact windows equal to those of the events written,
the per-epoch cap, rows out, lag as backlog, dead letters, a rescale while reading two
streams, and clear errors for a missing stream and an unreachable server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from engine.runtime.api import request_reconfiguration, start_run
from engine.runtime.driver.metrics import CollectingPublisher, CollectingRecorder
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_rows
from tests.engine.runtime.broker_jobs import sink_windows
from tests.engine.runtime.jobs import wait_epoch
from tests.engine.runtime.nats_jobs import (
    delete_streams,
    expected_windows,
    fill_for_run,
    nats_job,
    new_stream,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def broker(service_urls: dict[str, str]) -> Iterator[tuple[str, list[str]]]:
    """The suite's NATS and two fresh stream names, deleted afterwards."""
    url = service_urls["nats_url"]
    streams = [new_stream(), new_stream()]
    yield url, streams
    delete_streams(url, streams)


def _memory() -> dict:
    return {"type": "sink.memory", "params": {"name": f"nats_{uuid.uuid4().hex[:6]}"}}


def test_reads_every_message_once_with_cap_lag_and_dead_letters(spark, tmp_path, broker) -> None:  # type: ignore[no-untyped-def]
    url, (stream, _) = broker
    cap = 700
    total, last = fill_for_run(url, [stream], 3000, cap, malformed_every=500)
    publisher, memory = CollectingPublisher(), _memory()
    run = start_run(nats_job(url, [stream], cap, memory), checkpoint=str(tmp_path / "ckpt"),
                    publisher=publisher, spark=spark, trigger_ms=0, stop_after_epoch=last)
    assert run.wait(240) == "stopped", run.failure()
    epochs = sorted(publisher.epochs, key=lambda e: e["epoch"])
    consumed = [e["operators"]["events"]["rows_out"] for e in epochs]
    assert [e["epoch"] for e in epochs] == list(range(last + 1))
    assert sum(consumed) == total and max(consumed) == cap
    assert epochs[0]["backlog_rows"] == total - cap
    assert epochs[0]["broker_sources"]["events"]["lag"] == {stream: total - cap}
    assert epochs[-1]["backlog_rows"] == 0
    letters = [e["broker_sources"]["events"] for e in epochs]
    assert sum(r["dead_letters"] for r in letters) == 6
    sample = next(r["dead_letter_sample"] for r in letters if r["dead_letters"])
    assert sample.startswith("501: ") and "'not a time' is not a timestamp" in sample
    name = memory["params"]["name"]
    assert sink_windows(memory_sink_rows(name)) == expected_windows(1, 3000)
    clear_memory_sink(name)


def test_rescale_while_reading_two_streams_stays_exact(spark, tmp_path, broker) -> None:  # type: ignore[no-untyped-def]
    url, streams = broker
    cap = 800
    total, last = fill_for_run(url, streams, 3000, cap)
    publisher, recorder, memory = CollectingPublisher(), CollectingRecorder(), _memory()
    run = start_run(nats_job(url, streams, cap, memory), checkpoint=str(tmp_path / "ckpt"),
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
    name = memory["params"]["name"]
    assert sink_windows(memory_sink_rows(name)) == expected_windows(2, 3000)
    clear_memory_sink(name)
