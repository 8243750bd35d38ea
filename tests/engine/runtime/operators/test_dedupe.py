"""``dedupe`` through the VSN stage: first row per key within the bound, exactly, across a
live rescale; the expected rows are computed sequentially from the generator's rows."""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine.runtime.api import request_reconfiguration, start_run
from engine.runtime.driver.metrics import CollectingPublisher, CollectingRecorder
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_rows
from engine.runtime.io.sources import GeneratorSpec, generator_rows
from engine.runtime.operators.columns import TIME_US
from engine.runtime.operators.dedupe import kept_rows, parse_dedupe_spec
from tests.engine.runtime.jobs import KEYS, ROWS_PER_SECOND

SPEC = parse_dedupe_spec("d", {"key": ["k"], "time": "t", "within": "10 seconds"})


def test_kept_rows_keeps_the_first_per_key_within_the_bound() -> None:
    rows = pa.table({"k": [1, 1, 1, 2, 1], TIME_US: [0, 5, 12_000_000, 3, 9_999_999]})
    seen = pa.table({"k": [2], "__first_us": [-20_000_000]})
    kept = kept_rows(SPEC, rows, seen)
    assert sorted(zip(kept["k"].to_pylist(), kept[TIME_US].to_pylist(), strict=True)) == [
        (1, 0),
        (1, 12_000_000),
        (2, 3),
    ]
    assert kept_rows(SPEC, rows, pa.table({"k": [1], "__first_us": [-1]}))["k"].to_pylist() == [
        1,
        2,
    ]


@pytest.mark.spark
def test_dedupe_is_exact_across_a_rescale(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sink = f"dedupe_{uuid.uuid4().hex[:6]}"
    generator = {"rows_per_second": ROWS_PER_SECOND, "keys": KEYS, "seed": 3}
    job = {
        "name": "dedupe-test",
        "key_groups": 16,
        "operators": [
            {
                "id": "events",
                "type": "source.generator",
                "params": generator,
            },
            {
                "id": "once",
                "type": "dedupe",
                "parallelism": 2,
                "params": {
                    "key": ["campaign_id"],
                    "time": "event_time",
                    "within": "2 seconds",
                    "watermark": "1 seconds",
                },
            },
            {"id": "out", "type": "sink.memory", "params": {"name": sink}},
        ],
        "edges": [{"from": "events", "to": "once"}, {"from": "once", "to": "out"}],
    }
    recorder = CollectingRecorder()
    run = start_run(
        job,
        checkpoint=str(tmp_path / "ckpt"),
        publisher=CollectingPublisher(),
        recorder=recorder,
        spark=spark,
        trigger_ms=0,
        stop_after_epoch=6,
    )
    while (-1 if run.last_epoch is None else run.last_epoch) < 1:
        assert run.failure() is None, run.failure()
        time.sleep(0.05)
    request_reconfiguration(run.channel, kind="rescale", operator="once", parallelism=5)
    assert run.wait(180) == "stopped"
    assert recorder.acks[0].status == "applied"

    spec = GeneratorSpec.from_params(generator, run.start_ms)
    rows = generator_rows(spark, spec, 0, 7 * ROWS_PER_SECOND, 2).orderBy("event_id").collect()
    last: dict[int, int] = {}
    expected = set()
    for row in rows:
        at = row["event_id"] * 1_000_000 // ROWS_PER_SECOND
        if row["campaign_id"] not in last or at >= last[row["campaign_id"]] + 2_000_000:
            last[row["campaign_id"]] = at
            expected.add(row["event_id"])
    got = memory_sink_rows(sink)
    ids = got["event_id"].to_pylist()
    assert len(ids) == len(set(ids))  # nothing doubled
    assert set(ids) == expected
    assert pc.min(got["event_time"]).as_py() is not None
    clear_memory_sink(sink)
