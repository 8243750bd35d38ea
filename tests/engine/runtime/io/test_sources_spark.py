"""The other sources: a directory of files and Spark's rate source, through a VSN stage."""

from __future__ import annotations

import json
import uuid

import pytest

from engine.runtime.api import start_run
from engine.runtime.driver.metrics import CollectingPublisher
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_rows

pytestmark = pytest.mark.spark


def test_files_source_feeds_a_dedupe(spark, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("STREAMSCALE_DATA_DIR", str(tmp_path))
    inbox = tmp_path / "in"
    inbox.mkdir()
    rows = [{"user": u % 5, "at": f"2026-01-01T00:00:{u:02d}Z", "n": u} for u in range(20)]
    (inbox / "a.json").write_text("\n".join(json.dumps(r) for r in rows))
    sink = f"files_{uuid.uuid4().hex[:6]}"
    job = {
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
