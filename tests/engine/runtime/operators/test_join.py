"""``join`` through the VSN stage. The instance code against a brute-force definition
(through changing assignments and a replayed epoch), then whole runs on Spark against
Spark's own join of the generator's rows, through live rescales."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pyarrow as pa
import pytest

from engine.dag import parse_job_graph
from engine.planner import plan_job
from engine.runtime.api import request_reconfiguration
from engine.runtime.control.run_config import initial_config
from engine.runtime.errors import CommandRejected
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_rows
from engine.runtime.io.sources import GeneratorSpec, generator_rows
from engine.runtime.operators.columns import KG, TIME_US
from engine.runtime.operators.entries import ROW, decode
from engine.runtime.operators.join import (
    SIDE,
    change_refused,
    matches,
    parse_join_spec,
    unexpired,
    usable_rows,
)
from engine.runtime.operators.join_worker import process_join_instance
from engine.runtime.stage.logic_check import logic_checker
from engine.runtime.stage.vsn_worker import REPORT, EpochTask, InstanceReport
from engine.runtime.state import StoreSpec, open_store
from tests.engine.runtime.jobs import (
    actual_pairs,
    expected_pairs,
    join_job,
    start_collected_run,
    wait_epoch,
)

SPEC = parse_join_spec("j", {"key": ["k"], "time": "t", "within": "700 microseconds"}).with_layout(
    ["k", "t", "a"], ["k", "t", "b"]
)
KEY_GROUPS = 8
OUTPUT = pa.schema(
    [
        ("k", pa.int64()),
        ("t", pa.int64()),
        ("a", pa.string()),
        ("b", pa.string()),
        (REPORT, pa.string()),
    ]
)


def _rows(rng: random.Random, first_us: int, count: int, serial: list[int]) -> pa.Table:
    """Input rows as the stage ships them: both sides, keys 0..5 (some null)."""
    sides, keys, times, a, b = [], [], [], [], []
    for _ in range(count):
        serial[0] += 1
        which = rng.randint(0, 1)
        key = None if rng.random() < 0.05 else rng.randint(0, 5)
        sides.append(which)
        keys.append(key)
        times.append(first_us + rng.randint(0, 1500))
        a.append(f"a{serial[0]}" if which == 0 else None)
        b.append(f"b{serial[0]}" if which == 1 else None)
    return pa.table(
        {
            KG: pa.array([0 if k is None else k % KEY_GROUPS for k in keys], pa.int32()),
            SIDE: pa.array(sides, pa.int8()),
            TIME_US: pa.array(times, pa.int64()),
            "k": pa.array(keys, pa.int64()),
            "t": pa.array(times, pa.int64()),
            "a": pa.array(a, pa.string()),
            "b": pa.array(b, pa.string()),
        }
    )


def _brute_force(rows: pa.Table, within_us: int) -> set[tuple[str, str]]:
    listed = rows.to_pylist()
    left = [r for r in listed if r[SIDE] == 0 and r["k"] is not None]
    right = [r for r in listed if r[SIDE] == 1 and r["k"] is not None]
    return {
        (lr["a"], rr["b"])
        for lr in left
        for rr in right
        if lr["k"] == rr["k"] and abs(lr[TIME_US] - rr[TIME_US]) <= within_us
    }


def _attempt(
    task: EpochTask, rows: pa.Table, instances: range, store: Any
) -> list[tuple[str, str]]:
    """One try of an epoch by ``instances``, each given the rows of the key groups it owns."""
    out = []
    for instance in instances:
        mine = rows.filter(pa.array([task.owners[kg] == instance for kg in rows[KG].to_pylist()]))
        out += _pairs(process_join_instance(task, InstanceReport(instance=instance), mine, store))
    return out


def _pairs(table: pa.Table | None) -> list[tuple[str, str]]:
    if table is None:
        return []
    return list(zip(table["a"].to_pylist(), table["b"].to_pylist(), strict=True))


def test_matches_is_the_keyed_time_bounded_product() -> None:
    rng = random.Random(5)
    rows = _rows(rng, 0, 300, [0])
    usable = usable_rows(SPEC, rows, None)
    left = usable.filter(pa.compute.equal(usable[SIDE], 0))
    right = usable.filter(pa.compute.equal(usable[SIDE], 1))
    found = matches(SPEC, left, right)
    assert found.column_names == [KG, "k", "t", "a", "b"]
    pairs = _pairs(found)
    assert len(pairs) == len(set(pairs))
    assert set(pairs) == _brute_force(rows, 700)
    assert matches(SPEC, left, right.slice(0, 0)).num_rows == 0


def test_usable_rows_drop_null_keys_null_times_and_late_rows() -> None:
    rows = pa.table(
        {
            KG: pa.array([0, 0, 0, 0], pa.int32()),
            SIDE: pa.array([0, 1, 0, 1], pa.int8()),
            TIME_US: pa.array([10, None, 5, 20], pa.int64()),
            "k": pa.array([1, 1, None, 2], pa.int64()),
        }
    )
    assert usable_rows(SPEC, rows, None)[TIME_US].to_pylist() == [10, 20]
    assert usable_rows(SPEC, rows, 11)[TIME_US].to_pylist() == [20]


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
def test_instances_emit_each_pair_once_through_rescales_and_a_replay(
    tmp_path: Any, store_kind: str
) -> None:
    rng = random.Random(11)
    store = open_store(StoreSpec(store_kind, str(tmp_path), f"join-{uuid.uuid4().hex[:6]}"))
    serial = [0]
    delay_us = 600
    everything, emitted, maxima = [], [], [None, None]
    for epoch in range(12):
        rows = _rows(rng, epoch * 1000, 120, serial)
        everything.append(rows)
        known = [m for m in maxima if m is not None]
        watermark = min(maxima) - delay_us if len(known) == 2 else None  # type: ignore[type-var]
        parallelism = rng.randint(1, 4)
        owners = tuple(rng.randrange(parallelism) for _ in range(KEY_GROUPS))
        task = EpochTask(SPEC, StoreSpec("memory", "", ""), epoch, watermark, owners, OUTPUT)

        if epoch in (4, 9):  # a crash after some instances wrote: the epoch is replayed
            _attempt(task, rows, range(parallelism // 2 + 1), store)
        emitted += _attempt(task, rows, range(parallelism), store)
        for which in (0, 1):
            times = rows.filter(pa.compute.equal(rows[SIDE], which))[TIME_US]
            top = pa.compute.max(times).as_py()
            maxima[which] = top if maxima[which] is None else max(maxima[which], top)
    assert len(emitted) == len(set(emitted)), "a pair was emitted twice"
    assert set(emitted) == _brute_force(pa.concat_tables(everything), 700)
    # The buffers were pruned by the watermark: only recent rows are left (every key
    # arrives in every epoch, so each key's entry was rewritten without its expired rows).
    entries = store.fire_timers("j", store.groups("j"), 2**62)
    columns = everything[-1].schema.remove(everything[-1].schema.get_field_index(KG))
    buffered = decode(pa.compute.list_flatten(pa.compute.split_pattern(entries["value"], ROW)),
                      columns)
    assert buffered.num_rows and pa.compute.min(buffered[TIME_US]).as_py() >= 9000


def test_a_logic_change_may_narrow_the_bound_but_not_move_the_key() -> None:
    old = parse_join_spec("j", {"key": ["k"], "time": "t", "within": "5 seconds"})
    narrower = parse_join_spec("j", {"key": ["k"], "time": "t", "within": "2 seconds"})
    wider = parse_join_spec("j", {"key": ["k"], "time": "t", "within": "9 seconds"})
    moved = parse_join_spec("j", {"key": ["x"], "time": "t", "within": "5 seconds"})
    assert change_refused(old, narrower) is None
    assert "widening" in str(change_refused(old, wider))
    assert "key" in str(change_refused(old, moved))


@pytest.mark.spark
def test_join_run_matches_sparks_join_through_rescales(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sink = f"join_{uuid.uuid4().hex[:6]}"
    job = join_job({"type": "sink.memory", "params": {"name": sink}}, parallelism=2)
    run, publisher, recorder = start_collected_run(spark, tmp_path, job, last_epoch=9)
    wait_epoch(run, 1)
    up = request_reconfiguration(run.channel, kind="rescale", operator="pairs", parallelism=6)
    assert recorder.wait_for(up, 60).status == "applied"
    wait_epoch(run, 4)
    down = request_reconfiguration(run.channel, kind="rescale", operator="pairs", parallelism=3)
    assert recorder.wait_for(down, 60).status == "applied"
    assert run.wait(180) == "stopped"

    acks = {a.request_id: a for a in recorder.acks}
    assert acks[up].state_bytes_copied == 0 and acks[down].state_bytes_copied == 0
    by_epoch = {m["epoch"]: m["operators"]["pairs"]["instances"] for m in publisher.epochs}
    assert by_epoch[0] == 2 and by_epoch[acks[up].applied_epoch] == 6
    assert by_epoch[9] == 3
    expected = expected_pairs(spark, run.start_ms, 9)
    assert len(expected) > 1000
    assert actual_pairs(memory_sink_rows(sink)) == expected
    clear_memory_sink(sink)


def test_buffers_keep_exactly_the_rows_a_future_row_can_match() -> None:
    rows = pa.table({TIME_US: pa.array([99, 100, 101, 500], pa.int64())})
    spec = parse_join_spec("j", {"key": ["k"], "time": "t", "within": "400 microseconds"})
    # A future row is at least the watermark (500); it matches rows from 500 - 400 on.
    assert unexpired(spec, rows, 500)[TIME_US].to_pylist() == [100, 101, 500]
    assert unexpired(spec, rows, None).num_rows == 4


@pytest.mark.spark
def test_logic_changes_around_a_join_are_checked_against_its_output(spark) -> None:  # type: ignore[no-untyped-def]
    job = join_job({"type": "sink.memory", "params": {"name": "unused"}})
    job["operators"].insert(-1, {"id": "late", "type": "filter", "params": {"condition": "true"}})
    job["edges"] = [e for e in job["edges"] if e["from"] != "pairs"] + [
        {"from": "pairs", "to": "late"},
        {"from": "late", "to": "joined"},
    ]
    graph = parse_job_graph(job)
    batch = generator_rows(spark, GeneratorSpec.from_params({"rows_per_second": 10}), 0, 10, 2)
    check = logic_checker(graph, initial_config(plan_job(graph)), batch)
    check("late", {"condition": "click_time > event_time"})  # a right-only column: accepted
    with pytest.raises(CommandRejected, match="no_such"):
        check("late", {"condition": "no_such > 1"})
    pairs = next(o for o in job["operators"] if o["id"] == "pairs")["params"]
    check("pairs", {**pairs, "within": "500 milliseconds"})
    with pytest.raises(CommandRejected, match="widening"):
        check("pairs", {**pairs, "within": "1 minute"})
    with pytest.raises(CommandRejected, match="cannot read duration"):
        check("pairs", {**pairs, "within": "soon"})
