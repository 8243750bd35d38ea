"""Output stays on the executors: a dedupe that lets every row through writes them to the
files sink without the driver holding them, so the driver's memory stays flat."""

from __future__ import annotations

import threading

import psutil
import pyarrow.parquet as pq
import pytest

from engine.runtime.api import start_run
from engine.runtime.driver.metrics import CollectingPublisher

pytestmark = pytest.mark.spark

ROWS = 200_000
LAST_EPOCH = 5


def test_a_dedupe_emitting_every_row_keeps_the_driver_memory_flat(  # type: ignore[no-untyped-def]
    spark, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("STREAMSCALE_DATA_DIR", str(tmp_path))  # paths are data-folder relative
    out = tmp_path / "out"
    job = {
        "name": "dedupe-everything",
        "key_groups": 16,
        "operators": [
            {"id": "events", "type": "source.generator", "params": {"rows_per_second": ROWS}},
            {
                "id": "once",
                "type": "dedupe",
                "parallelism": 2,
                "params": {"key": ["event_id"], "time": "event_time", "within": "1 seconds"},
            },
            {"id": "out", "type": "sink.files", "params": {"path": "out", "format": "parquet"}},
        ],
        "edges": [{"from": "events", "to": "once"}, {"from": "once", "to": "out"}],
    }
    process = psutil.Process()
    publisher = CollectingPublisher()
    run = start_run(
        job,
        checkpoint=str(tmp_path / "ckpt"),
        publisher=publisher,
        spark=spark,
        trigger_ms=0,
        stop_after_epoch=LAST_EPOCH,
    )
    samples: dict[int, float] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            epoch = -1 if run.last_epoch is None else run.last_epoch
            rss = process.memory_info().rss
            samples[epoch] = max(samples.get(epoch, 0.0), rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert run.wait(600) == "stopped", run.failure()
    done.set()
    sampler.join()
    emitted = sum(e["operators"]["once"]["rows_out"] for e in publisher.epochs)
    assert emitted == ROWS * (LAST_EPOCH + 1)  # every row went through
    assert pq.read_table(str(out)).num_rows == emitted
    settled = samples[1]  # after two epochs: JVM gateway, workers and caches are warm
    later = max(v for e, v in samples.items() if e >= 2)
    # Each epoch's output is ~30 MB in Arrow: three epochs collected would show.
    assert later <= settled * 1.15 + 20 * 2**20, (settled / 2**20, later / 2**20)
