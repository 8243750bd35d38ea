"""The state stores: one layout, atomic per key group with its mark, skipping replays."""

from __future__ import annotations

import multiprocessing
import uuid

import pyarrow as pa
import pytest

from engine.runtime.state import KeyedChanges, StoreSpec, open_store


@pytest.fixture(params=["sqlite", "redis", "memory"])
def store(request, tmp_path, redis_url):  # type: ignore[no-untyped-def]
    location = {"sqlite": str(tmp_path), "redis": redis_url, "memory": ""}[request.param]
    opened = open_store(StoreSpec(request.param, location, f"sstest-{uuid.uuid4().hex[:8]}"))
    if request.param == "redis":
        opened.cache_root = str(tmp_path / "cache")  # type: ignore[attr-defined]
    yield opened
    opened.clear()


def _puts(timer: int, pairs: dict[str, str]) -> pa.Table:
    return pa.table(
        {
            "timer": pa.array([timer] * len(pairs), pa.int64()),
            "field": pa.array(list(pairs), pa.string()),
            "value": pa.array(list(pairs.values()), pa.string()),
        }
    )


def _wanted(kg: int, fields: list[str]) -> pa.Table:
    return pa.table({"kg": pa.array([kg] * len(fields), pa.int32()),
                     "field": pa.array(fields, pa.string())})


def _values(store, kg: int, fields: list[str]) -> dict[str, tuple[int, str]]:  # type: ignore[no-untyped-def]
    found = store.read_entries("op", _wanted(kg, fields))
    return {f: (t, v) for f, t, v in zip(found["field"].to_pylist(), found["timer"].to_pylist(),
                                         found["value"].to_pylist(), strict=True)}


def test_entries_are_read_by_key_and_by_due_timer(store) -> None:  # type: ignore[no-untyped-def]
    emitted = pa.table({"k": pa.array([7], pa.int64())})
    changes = {
        1: KeyedChanges(puts=pa.concat_tables([_puts(10, {"a": "v1"}), _puts(20, {"b": "x"})])),
        2: KeyedChanges(puts=_puts(10, {"c": "v3"}), emitted=emitted),
    }
    assert store.commit_entries("op", 4, changes) > 0
    assert store.marks("op", [1, 2, 3]) == {1: 4, 2: 4}
    assert store.groups("op") == {1, 2}
    found = store.read_entries("op", _wanted(1, ["zz", "a"]))
    assert found.to_pylist() == [{"kg": 1, "timer": 10, "field": "a", "value": "v1"}]
    due = store.fire_timers("op", [1, 2], 15)
    assert sorted(zip(due["kg"].to_pylist(), due["field"].to_pylist(), strict=True)) == [
        (1, "a"), (2, "c")]
    assert store.read_emitted("op", [1, 2]) == {2: emitted}
    assert store.bytes_read > 0


def test_a_replayed_commit_changes_nothing_and_the_first_emitted_rows_stay(store) -> None:  # type: ignore[no-untyped-def]
    first = pa.table({"k": pa.array([1], pa.int64())})
    assert store.commit_entries("op", 5, {1: KeyedChanges(_puts(20, {"a": "y"}), None, first)})
    again = {1: KeyedChanges(_puts(20, {"a": "no"}), None, first.slice(0, 0)),
             2: KeyedChanges(_puts(20, {"b": "new"}))}
    store.commit_entries("op", 5, again)  # group 1 holds epoch 5 already; group 2 does not
    assert _values(store, 1, ["a"]) == {"a": (20, "y")}
    assert _values(store, 2, ["b"]) == {"b": (20, "new")}
    assert store.read_emitted("op", [1]) == {1: first}
    assert store.marks("op", [1, 2]) == {1: 5, 2: 5}


def test_a_key_moves_its_timer_and_expiry_drops_the_keys_it_passed(store) -> None:  # type: ignore[no-untyped-def]
    store.commit_entries("op", 1, {0: KeyedChanges(_puts(10, {"a": "1", "b": "1", "c": "1"}))})
    store.commit_entries("op", 2, {0: KeyedChanges(_puts(30, {"a": "2"}))})  # a moves to 30
    # Expiring timers <= 10 drops b and c, not a (its newest version is at 30), nor d (put
    # by the same commit).
    store.commit_entries("op", 3, {0: KeyedChanges(_puts(5, {"d": "3"}), expire=10)})
    assert _values(store, 0, ["a", "b", "c", "d"]) == {"a": (30, "2"), "d": (5, "3")}
    for epoch in range(4, 12):  # commits that merge the runs keep the same answer
        store.commit_entries("op", epoch, {0: KeyedChanges(_puts(40, {f"x{epoch}": "x"}))})
    assert _values(store, 0, ["a", "b", "c", "d"]) == {"a": (30, "2"), "d": (5, "3")}


def _open_and_write(location: str, namespace: str, worker: int, barrier) -> None:  # type: ignore[no-untyped-def]
    store = open_store(StoreSpec("sqlite", location, namespace))
    puts = _puts(1, {str(k): "x" * 20 for k in range(6000)})  # long enough to collide with
    barrier.wait()
    store.groups("op")  # opens the file: the first one sets it up
    store.commit_entries("op", 1, {worker * 100 + kg: KeyedChanges(puts) for kg in range(32)})


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


def test_a_store_measures_what_it_holds_and_holds_nothing_once_cleared(store) -> None:  # type: ignore[no-untyped-def]
    assert (store.size().entries, store.size().key_groups) == (0, 0)
    store.commit_entries("op", 1, {1: KeyedChanges(_puts(10, {"a": "1", "b": "1"})),
                                   3: KeyedChanges(_puts(10, {"c": "1"}))})
    held = store.size()
    assert (held.entries, held.key_groups) == (3, 2) and held.bytes > 0
    store.clear()
    assert (store.size().entries, store.size().key_groups) == (0, 0)
