"""The state stores: atomic per key group, carrying the epoch, skipping replays."""

from __future__ import annotations

import multiprocessing
import uuid

import pyarrow as pa
import pytest

from engine.runtime.state import StoreSpec, open_store
from engine.runtime.state.base import EMITTED
from engine.runtime.state.keyed import KeyedChanges


@pytest.fixture(params=["sqlite", "files", "redis", "memory"])
def store(request, tmp_path, redis_url):  # type: ignore[no-untyped-def]
    location = {"sqlite": str(tmp_path), "files": str(tmp_path), "redis": redis_url,
                "memory": ""}[request.param]
    opened = open_store(StoreSpec(request.param, location, f"sstest-{uuid.uuid4().hex[:8]}"))
    yield opened
    opened.clear()


def _table(values: list[int]) -> pa.Table:
    return pa.table({"k": pa.array(values, pa.int64()), EMITTED: pa.array([False] * len(values))})


def test_writes_carry_their_epoch_and_replays_are_skipped(store) -> None:  # type: ignore[no-untyped-def]
    assert store.read_group("op", 3) is None
    assert store.write_group("op", 3, 5, _table([1, 2])) > 0
    assert store.write_group("op", 3, 5, _table([9])) == 0  # the same epoch again
    assert store.write_group("op", 3, 4, _table([9])) == 0  # an older epoch
    group = store.read_group("op", 3)
    assert group.epoch == 5 and group.table["k"].to_pylist() == [1, 2]
    assert store.write_group("op", 3, 6, _table([7])) > 0
    assert store.read_group("op", 3).table["k"].to_pylist() == [7]


def test_groups_are_listed_per_operator_and_deleted(store) -> None:  # type: ignore[no-untyped-def]
    store.write_group("a", 1, 0, _table([1]))
    store.write_group("a", 7, 0, _table([2]))
    store.write_group("b", 1, 0, _table([3]))
    assert store.groups("a") == {1, 7} and store.groups("b") == {1}
    store.delete_group("a", 7)
    assert store.groups("a") == {1}
    assert store.read_group("a", 7) is None


def test_an_epochs_changes_apply_together_and_skip_what_a_replay_already_wrote(store) -> None:  # type: ignore[no-untyped-def]
    store.write_group("op", 1, 3, _table([1]))
    store.write_group("op", 2, 5, _table([2]))  # written by epoch 5 already
    store.write_group("op", 4, 3, _table([4]))
    written = store.write_groups(
        "op", 5, {1: _table([10, 11]), 2: _table([99]), 3: _table([30]), 4: None}
    )
    assert written > 0
    found = store.read_groups("op", [1, 2, 3, 4, 5])
    assert sorted(found) == [1, 2, 3]
    assert found[1].epoch == 5 and found[1].table["k"].to_pylist() == [10, 11]
    assert found[2].table["k"].to_pylist() == [2]  # the replayed write was skipped
    assert found[3].table["k"].to_pylist() == [30]
    assert store.groups("op") == {1, 2, 3}
    assert store.write_groups("op", 5, {1: _table([0])}) == 0  # the whole epoch again
    assert store.read_groups("op", []) == {}


def test_whole_groups_loaded_count_the_bytes_read(store) -> None:  # type: ignore[no-untyped-def]
    store.write_groups("op", 1, {1: _table(list(range(100))), 2: _table([5])})
    before = store.bytes_read
    found = store.load_groups("op", [1, 2, 3])
    assert store.bytes_read - before == sum(g.table.nbytes for g in found.values()) > 800
    after = store.bytes_read
    assert store.load_groups("op", [3]) == {} and store.bytes_read == after


def _open_and_write(location: str, namespace: str, worker: int, barrier) -> None:  # type: ignore[no-untyped-def]
    store = open_store(StoreSpec("sqlite", location, namespace))
    big = _table(list(range(6000)))  # a transaction long enough for others to collide with
    barrier.wait()
    store.groups("op")  # opens the file: the first one sets it up
    store.write_groups("op", 1, {worker * 100 + kg: big for kg in range(32)})


def test_workers_setting_up_one_sqlite_file_at_once_all_get_through(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Spark starts the Python workers of a stage together: each opens the run's file, and
    # the first ones find it new (switching it to WAL) while others already write. Fresh
    # interpreters: a fork of the test process could inherit a lock another thread holds.
    context = multiprocessing.get_context("spawn")
    for round_ in range(6):
        namespace = f"race-{round_}"
        barrier = context.Barrier(4)
        workers = [
            context.Process(target=_open_and_write, args=(str(tmp_path), namespace, w, barrier))
            for w in range(4)
        ]
        for worker in workers:
            worker.start()
        try:
            for worker in workers:
                worker.join(120)
        finally:
            for worker in workers:
                if worker.is_alive():
                    worker.kill()
        assert [w.exitcode for w in workers] == [0] * 4, f"round {round_}"
        store = open_store(StoreSpec("sqlite", str(tmp_path), namespace))
        assert len(store.groups("op")) == 4 * 32


def _puts(timer: int, pairs: dict[str, str]) -> pa.Table:
    return pa.table(
        {
            "timer": pa.array([timer] * len(pairs), pa.int64()),
            "field": pa.array(list(pairs), pa.string()),
            "value": pa.array(list(pairs.values()), pa.string()),
        }
    )


def _wanted(kg: int, timer: int, fields: list[str]) -> pa.Table:
    return pa.table(
        {
            "kg": pa.array([kg] * len(fields), pa.int32()),
            "timer": pa.array([timer] * len(fields), pa.int64()),
            "field": pa.array(fields, pa.string()),
        }
    )


def test_keyed_entries_are_read_by_key_and_by_due_timer(store) -> None:  # type: ignore[no-untyped-def]
    emitted = pa.table({"k": pa.array([7], pa.int64())})
    changes = {
        1: KeyedChanges(
            puts=pa.concat_tables([_puts(10, {"a": "v1", "b": "v2"}), _puts(20, {"a": "x"})])
        ),
        2: KeyedChanges(puts=_puts(10, {"c": "v3"}), emitted=emitted),
    }
    assert store.commit_entries("op", 4, changes) > 0
    assert store.marks("op", [1, 2, 3]) == {1: 4, 2: 4}
    found = store.read_entries("op", _wanted(1, 10, ["a", "zz"]))
    assert found.select(["kg", "timer", "field", "value"]).to_pylist() == [
        {"kg": 1, "timer": 10, "field": "a", "value": "v1"}
    ]
    due = store.fire_timers("op", [1, 2], 15)
    found_due = sorted(zip(due["kg"].to_pylist(), due["field"].to_pylist(), strict=True))
    assert found_due == [(1, "a"), (1, "b"), (2, "c")]
    assert store.read_emitted("op", [1, 2]) == {2: emitted}
    # Epoch 5 fires timer 10 of group 1 and changes one key of timer 20.
    fire = {1: KeyedChanges(puts=_puts(20, {"a": "y"}), fired=(10,), emitted=emitted)}
    assert store.commit_entries("op", 5, fire) > 0
    assert store.commit_entries("op", 5, {1: KeyedChanges(puts=_puts(20, {"a": "no"}))}) == 0
    assert store.fire_timers("op", [1], 15).num_rows == 0
    assert store.read_entries("op", _wanted(1, 20, ["a"]))["value"].to_pylist() == ["y"]
    assert store.marks("op", [1, 2]) == {1: 5, 2: 4}
    assert store.bytes_read > 0
