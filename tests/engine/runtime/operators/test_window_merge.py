"""The VSN instance's merge logic, without Spark: windows close on the watermark,
replayed epochs re-emit instead of re-applying, late rows are dropped."""

from __future__ import annotations

import pyarrow as pa
import pytest

from bench.instances import window_task
from engine.runtime.operators.columns import KG, TIME_US
from engine.runtime.operators.window_merge import assign_windows
from engine.runtime.operators.window_spec import parse_window_spec
from engine.runtime.operators.window_worker import process_window_instance
from engine.runtime.stage.vsn_worker import InstanceReport
from engine.runtime.state.memory import MemoryStateStore

LAYOUTS = [process_window_instance]

S = 1_000_000
SPEC = parse_window_spec(
    "agg",
    {
        "key": ["k"],
        "time": "t",
        "window": "10 seconds",
        "watermark": "0 seconds",
        "aggregates": {"n": "count(*)", "total": "sum(v)", "mean": "avg(v)"},
    },
)
INPUT = pa.schema([(KG, pa.int32()), ("k", pa.int64()), ("v", pa.int64()), (TIME_US, pa.int64())])


def _rows(events: list[tuple[int, int, int]]) -> pa.Table:
    """(key, event time in seconds, value) -> the raw rows Spark sends an instance."""
    return pa.table(
        {
            KG: pa.array([k % 4 for k, _, _ in events], pa.int32()),
            "k": pa.array([k for k, _, _ in events], pa.int64()),
            "v": pa.array([v for _, _, v in events], pa.int64()),
            TIME_US: pa.array([t * S for _, t, _ in events], pa.int64()),
        }
    )


def _epoch(
    store: MemoryStateStore,
    epoch: int,
    watermark_s: int | None,
    events: list[tuple[int, int, int]],
    process=process_window_instance,  # type: ignore[no-untyped-def]
) -> tuple[dict, InstanceReport]:
    watermark_us = None if watermark_s is None else watermark_s * S
    task = window_task(SPEC, INPUT, epoch, owners=(0, 0, 0, 0), watermark_us=watermark_us)
    report = InstanceReport(instance=0)
    emitted = process(task, report, _rows(events) if events else None, store)
    rows = (
        {}
        if emitted is None
        else {
            (r["k"], r["window_start"] // S): (r["n"], r["total"], r["mean"])
            for r in emitted.to_pylist()
        }
    )
    return rows, report


@pytest.mark.parametrize("process", LAYOUTS)
def test_windows_close_once_the_watermark_passes_their_end(process) -> None:  # type: ignore[no-untyped-def]
    store = MemoryStateStore()
    assert _epoch(store, 0, None, [(1, 1, 5), (1, 3, 7), (2, 4, 1)], process=process)[0] == {}
    assert _epoch(store, 1, 4, [(1, 8, 3), (2, 12, 2)], process=process)[0] == {}
    emitted, report = _epoch(store, 2, 11, [(1, 14, 1)], process=process)
    assert emitted == {(1, 0): (3, 15, 5.0), (2, 0): (1, 1, 1.0)}
    assert report.rows_in == 1 and report.rows_out == 2
    emitted, _ = _epoch(store, 3, 20, [], process=process)
    assert emitted == {(1, 10): (1, 1, 1.0), (2, 10): (1, 2, 2.0)}
    assert _epoch(store, 4, 20, [], process=process)[0] == {}


@pytest.mark.parametrize("process", LAYOUTS)
def test_a_replayed_epoch_re_emits_without_applying_twice(process) -> None:  # type: ignore[no-untyped-def]
    store = MemoryStateStore()
    _epoch(store, 0, None, [(1, 1, 5), (2, 2, 1)], process=process)
    first, _ = _epoch(store, 1, 10, [(1, 11, 4)], process=process)
    again, report = _epoch(store, 1, 10, [(1, 11, 4)], process=process)
    assert again == first == {(1, 0): (1, 5, 5.0), (2, 0): (1, 1, 1.0)}
    later, _ = _epoch(store, 2, 25, [], process=process)
    assert later == {(1, 10): (1, 4, 4.0)}  # counted once despite the replay


@pytest.mark.parametrize("process", LAYOUTS)
def test_rows_of_already_emitted_windows_are_dropped_as_late(process) -> None:  # type: ignore[no-untyped-def]
    store = MemoryStateStore()
    _epoch(store, 0, None, [(1, 1, 5)], process=process)
    assert _epoch(store, 1, 10, [], process=process)[0] == {(1, 0): (1, 5, 5.0)}
    emitted, report = _epoch(store, 2, 10, [(1, 2, 100), (1, 15, 1)], process=process)
    assert emitted == {} and report.rows_in == 2


def test_windows_are_assigned_as_spark_assigns_them() -> None:
    # Every window [start, start + length) with start a multiple of the slide that holds t,
    # negative times included (floor, not truncation).
    spec = parse_window_spec(
        "agg",
        {"key": ["k"], "time": "t", "window": "5 seconds", "slide": "2 seconds",
         "aggregates": {"n": "count(*)"}},
    )
    times = [-7 * S, -1, 0, 1, 3 * S + 5, 4 * S, 9 * S - 1, 10 * S]
    rows = pa.table({TIME_US: pa.array(times, pa.int64()), "k": pa.array(range(len(times)))})
    assigned = assign_windows(spec, rows)
    got = sorted(zip(assigned["k"].to_pylist(), assigned["window_start"].to_pylist(), strict=True))
    want = sorted(
        (k, start)
        for k, t in enumerate(times)
        for start in range((t // (2 * S) - 3) * 2 * S, t + 1, 2 * S)
        if start <= t < start + 5 * S
    )
    assert got == want
    tumbling = parse_window_spec(
        "agg", {"key": ["k"], "time": "t", "window": "10 seconds", "aggregates": {"n": "count(*)"}}
    )
    starts = assign_windows(tumbling, rows)["window_start"].to_pylist()
    assert starts == [t // (10 * S) * 10 * S for t in times]


def test_rows_without_an_event_time_fall_in_no_window() -> None:
    rows = pa.table({TIME_US: pa.array([5 * S, None, 12 * S], pa.int64()), "k": [1, 2, 3]})
    assigned = assign_windows(SPEC, rows)
    assert assigned["k"].to_pylist() == [1, 3]
    assert assigned["window_start"].to_pylist() == [0, 10 * S]


def test_rows_per_key_group_are_the_partials_row_counts_summed_by_group() -> None:
    import numpy as np

    from engine.runtime.operators.window_spec import ROWS
    from engine.runtime.operators.window_worker import kg_rows

    rng = np.random.default_rng(7)
    kgs = rng.integers(0, 128, 5000).astype(np.int32)
    rows = rng.integers(1, 4, 5000)
    partials = pa.table({KG: pa.chunked_array([kgs[:2000], kgs[2000:]]), ROWS: rows})
    expected: dict[int, int] = {}
    for kg, n in zip(kgs.tolist(), rows.tolist(), strict=True):
        expected[kg] = expected.get(kg, 0) + n
    assert kg_rows(partials) == expected
    assert kg_rows(partials.slice(0, 0)) == {}


NULLABLE = parse_window_spec(
    "agg",
    {
        "key": ["k"],
        "time": "t",
        "window": "4 seconds",
        "watermark": "0 seconds",
        "aggregates": {"n": "count(*)", "nv": "count(v)", "s": "sum(v)", "lo": "min(v)",
                       "hi": "max(v)", "m": "avg(v)"},
    },
)


def _by_the_rule(
    epochs: list[tuple[int | None, list[tuple[int, float, int | None]]]],
) -> list[list[dict]]:  # type: ignore[type-arg]
    """What NULLABLE emits per epoch, row by row: a row counts in its window unless the
    watermark it arrives under closed the window; a window is emitted by the first epoch
    whose watermark reaches its end."""
    open_windows: dict[tuple[int, int], list[int | None]] = {}
    emitted = []
    for watermark, events in epochs:
        for k, t, v in events:
            start = int(t * S) // (4 * S) * 4 * S
            if watermark is None or start + 4 * S > watermark:
                open_windows.setdefault((k, start), []).append(v)
        closing = sorted(w for w in open_windows if watermark is not None
                         and w[1] + 4 * S <= watermark)
        rows = []
        for k, start in closing:
            values = open_windows.pop((k, start))
            known = [v for v in values if v is not None]
            rows.append({"k": k, "window_start": start, "window_end": start + 4 * S,
                         "n": len(values), "nv": len(known), "s": sum(known) if known else None,
                         "lo": min(known, default=None), "hi": max(known, default=None),
                         "m": sum(known) / len(known) if known else None})
        emitted.append(rows)
    return emitted


def test_windows_fold_with_nulls_as_the_rule_says_on_the_memory_and_sqlite_stores(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Over random epochs (values null one time in three, keys seen again across epochs)
    the memory and SQLite stores emit the windows the rule gives, null partials included."""
    import random

    from engine.runtime.state import StoreSpec, open_store

    rng = random.Random(11)
    stores = {
        "memory": (process_window_instance, MemoryStateStore()),
        "sqlite": (process_window_instance, open_store(StoreSpec("sqlite", str(tmp_path)))),
    }
    emitted: dict[str, list] = {name: [] for name in stores}  # type: ignore[type-arg]
    given = []
    for epoch in range(12):
        events = [(rng.randrange(150), epoch + rng.random(), rng.choice([None, None, -3, 0, 7, 12]))
                  for _ in range(rng.randrange(0, 120))]
        rows = pa.table({
            KG: pa.array([k % 4 for k, _, _ in events], pa.int32()),
            "k": pa.array([k for k, _, _ in events], pa.int64()),
            "v": pa.array([v for _, _, v in events], pa.int64()),
            TIME_US: pa.array([int(t * S) for _, t, _ in events], pa.int64()),
        })
        watermark = (epoch - 1) * S if epoch else None
        given.append((watermark, events))
        for name, (process, store) in stores.items():
            task = window_task(NULLABLE, INPUT, epoch, owners=(0, 0, 0, 0), watermark_us=watermark)
            out = process(task, InstanceReport(instance=0), rows if events else None, store)
            found = [] if out is None else out.to_pylist()
            emitted[name].append(sorted(found, key=lambda r: (r["k"], r["window_start"])))
    assert any(emitted["memory"]) and any(r["lo"] is None for e in emitted["memory"] for r in e)
    assert emitted["memory"] == _by_the_rule(given)
    assert emitted["sqlite"] == emitted["memory"]


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_stores_take_the_input_as_deltas_and_emit_as_the_memory_store_does(
    kind, tmp_path, redis_url, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """On the embedded and the Redis store the instance puts its input's partials without
    reading the stored entries (a lookup would fail here), and over 30 random epochs, with
    the merges they cause, it emits what the memory store emits, null partials included."""
    import random
    import uuid

    from engine.runtime.state import StoreSpec, open_store
    from engine.runtime.state.runs_store import RunsStore

    def no_lookup(*_: object) -> None:
        raise AssertionError("the instance read the stored entries")

    groups = MemoryStateStore()
    monkeypatch.setattr(RunsStore, "read_entries", no_lookup)
    location = str(tmp_path) if kind == "sqlite" else redis_url
    folding = open_store(StoreSpec(kind, location, f"fold-{uuid.uuid4().hex[:8]}"))
    if kind == "redis":
        folding.cache_root = str(tmp_path / "cache")
    rng = random.Random(5)
    emitted: dict[str, list] = {"groups": [], "folding": []}  # type: ignore[type-arg]
    merged = 0  # the most runs a group held: its deltas met in merges and fired timers
    try:
        for epoch in range(30):
            events = [(rng.randrange(300), epoch / 3 + rng.random(),
                       rng.choice([None, None, -3, 0, 7, 12])) for _ in range(rng.randrange(80))]
            rows = pa.table({
                KG: pa.array([k % 4 for k, _, _ in events], pa.int32()),
                "k": pa.array([k for k, _, _ in events], pa.int64()),
                "v": pa.array([v for _, _, v in events], pa.int64()),
                TIME_US: pa.array([int(t * S) for _, t, _ in events], pa.int64()),
            })
            watermark = int((epoch / 3 - 1) * S) if epoch else None
            for name, store in (("groups", groups), ("folding", folding)):
                task = window_task(NULLABLE, INPUT, epoch, owners=(0, 0, 0, 0),
                                   watermark_us=watermark)
                out = process_window_instance(task, InstanceReport(instance=0),
                                              rows if events else None, store)
                found = [] if out is None else out.to_pylist()
                emitted[name].append(sorted(found, key=lambda r: (r["k"], r["window_start"])))
            rows_now = folding._rows("agg", range(4)).values()
            merged = max(merged, *(len(row.runs) for row in rows_now), 0)
    finally:
        folding.clear()
    assert merged >= 2 and sum(map(len, emitted["groups"])) > 100
    assert any(r["lo"] is None for e in emitted["groups"] for r in e)
    assert emitted["folding"] == emitted["groups"]
