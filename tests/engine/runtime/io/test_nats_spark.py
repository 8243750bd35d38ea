"""source.nats on the embedded NATS: exact windows equal to those of the events written,
the per-epoch cap, rows out, lag as backlog and dead letters (a rescale while reading:
``test_broker_rescale_spark``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from engine.runtime.api import start_run
from engine.runtime.driver.metrics import CollectingPublisher
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_rows
from tests.engine.runtime.broker_jobs import sink_windows
from tests.engine.runtime.brokers import read_in_capped_epochs
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
    sample = read_in_capped_epochs(publisher.epochs, last=last, total=total, cap=cap,
                                   dead_letters=6)
    first = min(publisher.epochs, key=lambda e: e["epoch"])
    assert first["broker_sources"]["events"]["lag"] == {stream: total - cap}
    assert sample.startswith("501: ") and "'not a time' is not a timestamp" in sample
    name = memory["params"]["name"]
    assert sink_windows(memory_sink_rows(name)) == expected_windows(1, 3000)
    clear_memory_sink(name)
