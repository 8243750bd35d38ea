"""The broker goes away mid-run. A private Redis (the product's embedded server under a
test folder, append-only) is stopped and started again: the run waits for it and its
results stay exact. Stopped for longer than the source's reconnect time, the run fails
with a cause that names the source and the broker, its password masked."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis

from engine.runtime.api import start_run
from engine.runtime.driver.metrics import CollectingPublisher
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_rows
from tests.engine.runtime.broker_jobs import (
    batch_windows,
    fill_for_run,
    fill_stream,
    sink_windows,
    stream_job,
)
from tests.engine.runtime.jobs import wait_epoch
from webapp.embedded import ensure_redis, stop_redis

pytestmark = pytest.mark.spark

CAP = 300


def test_broker_restarted_mid_run_then_run_resumes_exactly(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    var = tmp_path / "var"
    url = ensure_redis(var_dir=var)
    client = redis.Redis.from_url(url)
    stream = "orders"
    total, last = fill_for_run(client, [stream], 3000, CAP)
    sink = f"restart_{uuid.uuid4().hex[:6]}"
    publisher = CollectingPublisher()
    try:
        run = start_run(stream_job(url, [stream], CAP, {"type": "sink.memory",
                                                        "params": {"name": sink}}),
                        checkpoint=str(tmp_path / "ckpt"), publisher=publisher, spark=spark,
                        trigger_ms=0, stop_after_epoch=last)
        wait_epoch(run, 1)
        stop_redis(var_dir=var)
        time.sleep(4.0)
        assert ensure_redis(var_dir=var) == url  # same port, entries back from the AOF
        assert run.wait(300) == "stopped", run.failure()
        assert sum(e["operators"]["events"]["rows_out"] for e in publisher.epochs) == total
        assert sink_windows(memory_sink_rows(sink)) == batch_windows(client, [stream])
    finally:
        clear_memory_sink(sink)
        stop_redis(var_dir=var)


def test_broker_gone_past_reconnect_time_fails_the_run_clearly(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    var = tmp_path / "var"
    served = ensure_redis(var_dir=var)
    redis.Redis.from_url(served).config_set("requirepass", "s3cret-pw")
    url = f"redis://:s3cret-pw@127.0.0.1:{urlsplit(served).port}/0"
    client = redis.Redis.from_url(url)
    fill_stream(client, "orders", 0, 3000)
    job = stream_job(url, ["orders"], CAP, {"type": "sink.memory", "params": {"name": "gone"}})
    job["operators"][0]["params"]["reconnect_seconds"] = 3
    try:
        run = start_run(job, checkpoint=str(tmp_path / "ckpt"), publisher=CollectingPublisher(),
                        spark=spark, trigger_ms=200)
        wait_epoch(run, 0)
        threading.Thread(target=stop_redis, kwargs={"var_dir": var}).start()
        assert run.wait(180) == "failed"
        cause = str(run.failure())
        assert "source 'events': Redis at redis://:***@127.0.0.1:" in cause
        assert "unreachable for 3 s" in cause
        assert "s3cret-pw" not in cause
    finally:
        clear_memory_sink("gone")
        stop_redis(var_dir=var)
