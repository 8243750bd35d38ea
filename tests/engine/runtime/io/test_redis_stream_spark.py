"""source.redis_stream on the embedded Redis: exact windows equal to a batch read of the
same entries, the per-epoch cap, rows out, lag as backlog, dead letters, and rows counted
while rescaled at random points (a rescale while reading: ``test_broker_rescale_spark``)."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from engine.runtime.api import request_reconfiguration, start_run
from engine.runtime.driver.metrics import CollectingPublisher
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_rows
from tests.engine.runtime.broker_jobs import batch_windows, fill_for_run, sink_windows, stream_job
from tests.engine.runtime.brokers import read_in_capped_epochs

pytestmark = pytest.mark.spark


@pytest.fixture
def broker(service_urls: dict[str, str]) -> Iterator[tuple[str, redis.Redis, list[str]]]:
    """The product's Redis, a client, and two fresh stream keys deleted afterwards."""
    url = service_urls["redis_url"]
    client = redis.Redis.from_url(url)
    streams = [f"sstest-{uuid.uuid4().hex[:8]}:{name}" for name in ("a", "b")]
    yield url, client, streams
    client.delete(*streams)


def test_reads_every_entry_once_with_cap_lag_and_dead_letters(spark, tmp_path, broker) -> None:  # type: ignore[no-untyped-def]
    url, client, (stream, _) = broker
    cap = 700
    total, last = fill_for_run(client, [stream], 3000, cap, malformed_every=500)
    sink = f"redis_{uuid.uuid4().hex[:6]}"
    publisher = CollectingPublisher()
    memory = {"type": "sink.memory", "params": {"name": sink}}
    run = start_run(stream_job(url, [stream], cap, memory),
                    checkpoint=str(tmp_path / "ckpt"), publisher=publisher, spark=spark,
                    trigger_ms=0, stop_after_epoch=last)
    assert run.wait(240) == "stopped", run.failure()
    sample = read_in_capped_epochs(publisher.epochs, last=last, total=total, cap=cap,
                                   dead_letters=6)
    assert "'event_time': 'not a time' is not a timestamp" in sample
    expected = batch_windows(client, [stream])
    assert len(expected) > 100
    assert sink_windows(memory_sink_rows(sink)) == expected
    clear_memory_sink(sink)


def test_epochs_rescaled_at_random_points_count_what_they_read(spark, tmp_path, broker) -> None:  # type: ignore[no-untyped-def]
    # Rescales at random points of the epochs, each taken by the next epoch: every epoch
    # reports the rows it read, once, whatever parallelism it ran at.
    url, client, streams = broker
    cap = 800
    total, last = fill_for_run(client, streams, 6000, cap)
    publisher = CollectingPublisher()
    memory = {"type": "sink.memory", "params": {"name": f"redis_{uuid.uuid4().hex[:6]}"}}
    run = start_run(stream_job(url, streams, cap, memory), checkpoint=str(tmp_path / "ckpt"),
                    publisher=publisher, spark=spark, trigger_ms=0, stop_after_epoch=last)
    rng, parallelism = random.Random(3), 2
    while run.failure() is None and (run.last_epoch or 0) < last - 2:
        seen = run.last_epoch
        while run.last_epoch == seen and run.failure() is None:
            time.sleep(0.001)
        time.sleep(rng.uniform(0.0, 0.25))
        parallelism = rng.choice([p for p in (1, 2, 3, 4) if p != parallelism])
        request_reconfiguration(run.channel, kind="rescale", operator="counts",
                                parallelism=parallelism)
    assert run.wait(240) == "stopped", run.failure()
    epochs = sorted(publisher.epochs, key=lambda e: e["epoch"])
    assert len({e["operators"]["counts"]["instances"] for e in epochs}) >= 3
    read = [e["operators"]["events"]["rows_out"] for e in epochs]
    assert read == [cap] * (len(epochs) - 1) + [total - cap * (len(epochs) - 1)]
    clear_memory_sink(memory["params"]["name"])
