"""The other sources: a directory of files and Spark's rate source, through a VSN stage."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from engine.runtime.api import start_run
from engine.runtime.control.messages import CommandRequest
from engine.runtime.driver.metrics import CollectingPublisher, CollectingRecorder
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_rows

pytestmark = pytest.mark.spark


def _files_job(tmp_path, sink: str) -> dict:  # type: ignore[no-untyped-def]
    """One JSON file of 20 rows in the data folder -> filter -> dedupe -> memory sink."""
    inbox = tmp_path / "in"
    inbox.mkdir()
    rows = [{"user": u % 5, "at": f"2026-01-01T00:00:{u:02d}Z", "n": u} for u in range(20)]
    (inbox / "a.json").write_text("\n".join(json.dumps(r) for r in rows))
    return {
        "name": "files-test",
        "key_groups": 8,
        "operators": [
            {
                "id": "src",
                "type": "source.files",
                "params": {
                    "path": "in",
                    "format": "json",
                    "schema": {"user": "long", "at": "timestamp", "n": "long"},
                },
            },
            {"id": "big", "type": "filter", "params": {"condition": "n >= 2"}},
            {
                "id": "first",
                "type": "dedupe",
                "parallelism": 2,
                "params": {"key": ["user"], "time": "at", "within": "1 minute"},
            },
            {"id": "out", "type": "sink.memory", "params": {"name": sink}},
        ],
        "edges": [
            {"from": "src", "to": "big"},
            {"from": "big", "to": "first"},
            {"from": "first", "to": "out"},
        ],
    }


def test_files_source_feeds_a_dedupe(spark, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("STREAMSCALE_DATA_DIR", str(tmp_path))
    sink = f"files_{uuid.uuid4().hex[:6]}"
    job = _files_job(tmp_path, sink)
    run = start_run(
        job,
        checkpoint=str(tmp_path / "ckpt"),
        publisher=CollectingPublisher(),
        spark=spark,
        trigger_ms=200,
        stop_after_epoch=0,
    )
    assert run.wait(120) == "stopped"
    got = sorted(memory_sink_rows(sink)["n"].to_pylist())
    assert got == [2, 3, 4, 5, 6]  # the first row of each user at or after n = 2
    clear_memory_sink(sink)


def test_an_idle_files_run_runs_no_epoch_takes_a_new_file_then_a_stop(  # type: ignore[no-untyped-def]
    spark, tmp_path, monkeypatch
) -> None:
    """With nothing new in its folder a run stays idle: no epoch runs. A new file is taken
    by the next epoch, once (a file already taken is never read again), and a stop sent
    while idle is taken by an epoch of its own, which reads nothing."""
    monkeypatch.setenv("STREAMSCALE_DATA_DIR", str(tmp_path))
    sink = f"files_{uuid.uuid4().hex[:6]}"
    recorder = CollectingRecorder()
    run = start_run(
        _files_job(tmp_path, sink),
        checkpoint=str(tmp_path / "ckpt"),
        publisher=CollectingPublisher(),
        recorder=recorder,
        spark=spark,
        trigger_ms=200,
    )
    _until(lambda: run.last_epoch == 0, run)
    time.sleep(1.0)  # five intervals with nothing new
    assert run.last_epoch == 0 and run.status == "running"
    later = [{"user": u, "at": "2026-01-01T00:05:00Z", "n": 100 + u} for u in (1, 7)]
    (tmp_path / "in" / "b.json").write_text("\n".join(json.dumps(r) for r in later))
    _until(lambda: run.last_epoch == 1, run)
    run.channel.send(CommandRequest(kind="stop", operator=None, request_id="stop-idle",
                                    requested_at_ms=time.time() * 1000.0).to_message())
    asked = time.monotonic()
    assert run.wait(30) == "stopped"
    assert time.monotonic() - asked < 10
    assert run.last_epoch == 2
    (ack,) = [a for a in recorder.acks if a.request_id == "stop-idle"]
    assert ack.status == "applied" and ack.applied_epoch == 2
    # user 1 again 5 minutes later (past the dedupe's minute), user 7 new
    assert sorted(memory_sink_rows(sink)["n"].to_pylist()) == [2, 3, 4, 5, 6, 101, 107]
    clear_memory_sink(sink)


def _until(done, run, timeout_s: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline and run.failure() is None, run.failure()
        time.sleep(0.05)
