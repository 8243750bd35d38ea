"""The embedded store's keyed layout: sorted runs found by hash, merged size-tiered,
committed per key group with the mark, and files no group names collected."""

from __future__ import annotations

import multiprocessing
import os
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.runtime.errors import StreamRuntimeError
from engine.runtime.state import StoreSpec, open_store, sqlite_keyed
from engine.runtime.state.keyed import KeyedChanges
from engine.runtime.state.sorted_runs import (
    HASH,
    RUN_SCHEMA,
    Loaded,
    Run,
    RunFile,
    Span,
    entry_hashes,
    entry_order,
    find,
    live_entries,
    live_entries_of_groups,
    runs_to_merge,
    write_runs,
)


def _puts(entries: dict[tuple[int, str], str]) -> pa.Table:
    return pa.table(
        {
            "timer": pa.array([t for t, _ in entries], pa.int64()),
            "field": pa.array([f for _, f in entries], pa.string()),
            "value": pa.array(list(entries.values()), pa.string()),
        }
    )


def _wanted(kg: int, keys: list[tuple[int, str]]) -> pa.Table:
    return pa.table(
        {
            "kg": pa.array([kg] * len(keys), pa.int32()),
            "timer": pa.array([t for t, _ in keys], pa.int64()),
            "field": pa.array([f for _, f in keys], pa.string()),
        }
    )


def test_hashes_depend_on_timer_and_field_only() -> None:
    fields = pa.array(["", "a", "ab", "ba", "a", "x" * 300], pa.string())
    timers = pa.array([1, 1, 1, 1, 2, 1], pa.int64())
    hashes = entry_hashes(timers, fields)
    assert len(set(hashes.tolist())) == 6
    # The same entries at an offset into a larger array, and in another order, hash the same.
    padded = pa.array(["zz", "", "a", "ab", "ba", "a", "x" * 300], pa.string()).slice(1)
    assert entry_hashes(timers, padded).tolist() == hashes.tolist()
    assert entry_hashes(timers[::-1], fields[::-1]).tolist() == hashes[::-1].tolist()
    # Short strings alone are hashed position by position, beside a long one all at once:
    # both ways give the same hashes.
    assert entry_hashes(timers[:5], fields[:5]).tolist() == hashes[:5].tolist()


def _run_with_hashes(entries: list[tuple[int, int, str, str]]) -> Loaded:
    """A run whose hashes are given, sorted by them (to force collisions)."""
    entries = sorted(entries)
    table = pa.Table.from_arrays(
        [
            pa.array([e[0] for e in entries], pa.uint64()),
            pa.array([e[1] for e in entries], pa.int64()),
            pa.array([e[2] for e in entries], pa.string()),
            pa.array([e[3] for e in entries], pa.string()),
        ],
        schema=RUN_SCHEMA,
    )
    return Loaded(Run("f", len(entries)), table, table[HASH].to_numpy(), table["timer"].to_numpy())


def _find(newest_first: list[Loaded | Run], wanted: pa.Table, hashes: np.ndarray):  # type: ignore[no-untyped-def]
    """``find`` over one group (``hashes`` sorted)."""
    return find([Span(newest_first, 0, len(hashes))], wanted["timer"].to_numpy(),
                wanted["field"].combine_chunks(), hashes)


def test_entries_whose_hashes_collide_are_told_apart_by_their_field() -> None:
    wanted = pa.table(
        {"timer": pa.array([5, 5, 5], pa.int64()), "field": pa.array(["a", "b", "c"], pa.string())}
    )
    # All three wanted entries and the stored ones share one hash: only the field tells.
    run = _run_with_hashes([(7, 5, "c", "vc"), (7, 5, "a", "va"), (7, 6, "b", "other timer")])
    at, rows = _find([run], wanted, np.full(3, 7, np.uint64))
    found = dict(zip(at.tolist(), rows["value"].to_pylist(), strict=True))
    assert found == {0: "va", 2: "vc"}


def test_merged_runs_keep_the_newest_of_entries_whose_hashes_collide() -> None:
    old = _run_with_hashes([(7, 10, "a", "old a"), (7, 10, "b", "b"), (9, 10, "c", "old c")])
    new = _run_with_hashes([(7, 10, "a", "new a"), (7, 10, "d", "d"), (9, 10, "c", "new c")])
    live = live_entries([new, old])
    assert sorted(zip(live["field"].to_pylist(), live["value"].to_pylist(), strict=True)) == [
        ("a", "new a"),
        ("b", "b"),
        ("c", "new c"),
        ("d", "d"),
    ]
    assert live["h"].to_pylist() == sorted(live["h"].to_pylist())


def test_newer_runs_win_and_fired_timers_hide_older_entries() -> None:
    old = _run_with_hashes([(1, 10, "a", "old"), (2, 20, "b", "old"), (3, 10, "c", "old")])
    new = _run_with_hashes([(1, 10, "a", "new")])
    fired = Run(None, 0, fired=(10,))  # fired after ``old``, before ``new`` was put
    newest_first = [new, fired, old]
    wanted = pa.table(
        {"timer": pa.array([10, 20, 10], pa.int64()), "field": pa.array(["a", "b", "c"])}
    )
    at, rows = _find(newest_first, wanted, np.array([1, 2, 3], np.uint64))
    assert dict(zip(at.tolist(), rows["value"].to_pylist(), strict=True)) == {0: "new", 1: "old"}
    live = live_entries(newest_first)
    assert sorted(zip(live["field"].to_pylist(), live["value"].to_pylist(), strict=True)) == [
        ("a", "new"),
        ("b", "old"),
    ]
    assert live_entries(newest_first, until=15)["field"].to_pylist() == ["a"]


def test_runs_merge_size_tiered() -> None:
    # Three runs of one size merge; runs of another size in between keep them apart.
    assert runs_to_merge([Run("a", 1000), Run("b", 10), Run("c", 10)]) == 0
    assert runs_to_merge([Run("a", 1000), Run("b", 10), Run("c", 12), Run("d", 10)]) == 3
    assert runs_to_merge([Run("a", 10), Run("b", 100), Run("c", 10), Run("d", 10)]) == 0
    assert runs_to_merge([Run("a", 10), Run("b", 10), Run("c", 25)]) == 0
    # The merged run merges again with two runs of its size before it.
    assert runs_to_merge([Run("a", 900), Run("b", 30), Run("c", 30), Run("d", 10),
                          Run("e", 10), Run("f", 10)]) == 5
    # A run of tombstones only fits any size.
    assert runs_to_merge([Run("a", 10), Run(None, 0, fired=(5,)), Run("c", 10)]) == 3
    many = [Run(str(i), 1000 >> i) for i in range(15)]
    assert runs_to_merge(many) == 15


def _written(path: str, tables: list[pa.Table]) -> list[Run]:
    """Runs as a commit lists them after ``write_runs``: one batch, each from its start."""
    write_runs(path, tables)
    starts = np.cumsum([0] + [t.num_rows for t in tables]).tolist()
    return [Run(path, t.num_rows, batch=i, start=starts[i]) for i, t in enumerate(tables)]


def _sorted_run(entries: dict[tuple[int, str], str]) -> pa.Table:
    puts = _puts(entries)
    hashes = entry_hashes(puts["timer"], puts["field"])
    order = np.argsort(hashes)
    return pa.Table.from_arrays(
        [pa.array(hashes[order]), *[puts[n].take(pa.array(order)) for n in puts.column_names]],
        schema=RUN_SCHEMA)


def test_groups_whose_runs_share_a_batch_are_found_together(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """One commit's runs of three groups are one record batch; an older run of group 0 is
    in a file of its own, written as files were before (one record batch per run)."""
    tables = [_sorted_run({(10, "a"): "new a", (10, "b"): "b0"}),
              _sorted_run({(10, "a"): "a1"}),
              _sorted_run({(20, "c"): "c2", (10, "a"): "a2"})]
    newest = _written(str(tmp_path / "new"), tables)
    older = _sorted_run({(10, "a"): "old a", (10, "z"): "z0"})
    with pa.OSFile(str(tmp_path / "old"), "wb") as sink, pa.ipc.new_file(sink, RUN_SCHEMA) as w:
        w.write_batch(_sorted_run({(1, "x"): "other run"}).to_batches()[0])
        w.write_batch(older.to_batches()[0])
    before = Run.from_json([str(tmp_path / "old"), 1, older.num_rows, []])  # as listed before
    assert before.start is None
    assert Run.from_json(newest[2].as_json()) == newest[2]
    files = {path: RunFile(path) for path in (str(tmp_path / "new"), str(tmp_path / "old"))}
    runs = {0: [before, newest[0]], 1: [newest[1]], 2: [newest[2]]}  # oldest first
    loaded = {kg: [files[str(r.file)].loaded(r) for r in group] for kg, group in runs.items()}
    assert loaded[0][1].in_batch()[0] is loaded[2][0].in_batch()[0]  # one batch
    assert loaded[2][0].table.to_pylist() == tables[2].to_pylist()
    wanted = {0: [(10, "a"), (10, "b"), (10, "z"), (10, "q")], 1: [(10, "a"), (10, "b")],
              2: [(10, "a"), (20, "c"), (30, "c")]}
    spans, timers, fields, hashes, keys = [], [], [], [], []
    for kg, entries in wanted.items():
        table = _wanted(kg, entries)
        entry = entry_hashes(table["timer"], table["field"])
        order = np.argsort(entry)
        spans.append(Span(loaded[kg][::-1], len(hashes), len(hashes) + len(entries)))
        hashes += entry[order].tolist()
        keys += [(kg, *entries[i]) for i in order]
        timers += [entries[i][0] for i in order]
        fields += [entries[i][1] for i in order]
    at, rows = find(spans, np.array(timers, np.int64), pa.array(fields),
                    np.array(hashes, np.uint64))
    found = {keys[i]: value for i, value in zip(at.tolist(), rows["value"].to_pylist(),
                                                strict=True)}
    assert found == {(0, 10, "a"): "new a", (0, 10, "b"): "b0", (0, 10, "z"): "z0",
                     (1, 10, "a"): "a1", (2, 10, "a"): "a2", (2, 20, "c"): "c2"}


@pytest.fixture
def store(tmp_path):  # type: ignore[no-untyped-def]
    opened = open_store(StoreSpec("sqlite", str(tmp_path), f"runs-{uuid.uuid4().hex[:8]}"))
    yield opened
    opened.clear()


@pytest.fixture(params=["sqlite", "redis"])
def runs_store(request, tmp_path, redis_url):  # type: ignore[no-untyped-def]
    """A store that keeps windows as sorted runs: the embedded one, or Redis (its runs
    cached in a folder of the test's)."""
    location = str(tmp_path) if request.param == "sqlite" else redis_url
    opened = open_store(StoreSpec(request.param, location, f"runs-{uuid.uuid4().hex[:8]}"))
    if request.param == "redis":
        opened.cache_root = str(tmp_path / "cache")
    yield opened
    opened.clear()


_OPS = st.lists(
    st.tuples(
        st.integers(0, 2),  # key group
        st.dictionaries(
            st.tuples(st.sampled_from([10, 20, 30]), st.sampled_from(["a", "b", "c", "d", ""])),
            st.text("xyz", min_size=1, max_size=3),
            max_size=6,
        ),
        st.sets(st.sampled_from([10, 20, 30]), max_size=1),
    ),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_OPS)
def test_reads_after_any_commits_equal_a_plain_map(runs_store, ops) -> None:  # type: ignore[no-untyped-def]
    """Puts and fires in any order, with the merges they cause, read like a dict."""
    store = runs_store
    store.clear()
    model: dict[int, dict[tuple[int, str], str]] = {0: {}, 1: {}, 2: {}}
    every = [(t, f) for t in (10, 20, 30) for f in ("a", "b", "c", "d", "")]
    for epoch, (kg, puts, fired) in enumerate(ops):
        change = KeyedChanges(puts=_puts(puts) if puts else None, fired=tuple(sorted(fired)))
        store.commit_entries("op", epoch, {kg: change})
        for timer in fired:  # fired before the puts of the same commit
            model[kg] = {k: v for k, v in model[kg].items() if k[0] != timer}
        model[kg].update(puts)
        for group in model:
            found = store.read_entries("op", _wanted(group, every))
            stored = {
                (t, f): v
                for t, f, v in zip(
                    found["timer"].to_pylist(),
                    found["field"].to_pylist(),
                    found["value"].to_pylist(),
                    strict=True,
                )
            }
            assert stored == model[group]
            due = store.fire_timers("op", [group], 20)
            assert sorted(
                zip(due["timer"].to_pylist(), due["field"].to_pylist(), strict=True)
            ) == sorted(k for k in model[group] if k[0] <= 20)


_GROUP_CHANGE = st.tuples(
    st.dictionaries(
        st.tuples(st.sampled_from([10, 20, 30]), st.sampled_from(["a", "b", "c", "d", ""])),
        st.text("xyz", min_size=1, max_size=3),
        max_size=6,
    ),
    st.sets(st.sampled_from([10, 20, 30]), max_size=1),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(commits=st.lists(st.dictionaries(st.integers(0, 3), _GROUP_CHANGE, min_size=1),
                        min_size=1, max_size=20))
def test_commits_of_several_groups_read_like_a_plain_map(runs_store, commits) -> None:  # type: ignore[no-untyped-def]
    """Several groups per commit, whose merges are found together in one sort."""
    store = runs_store
    store.clear()
    model: dict[int, dict[tuple[int, str], str]] = {kg: {} for kg in range(4)}
    every = [(t, f) for t in (10, 20, 30) for f in ("a", "b", "c", "d", "")]
    for epoch, commit in enumerate(commits):
        changes = {
            kg: KeyedChanges(puts=_puts(puts) if puts else None, fired=tuple(sorted(fired)))
            for kg, (puts, fired) in commit.items()
        }
        store.commit_entries("op", epoch, changes)
        for kg, (puts, fired) in commit.items():
            for timer in fired:
                model[kg] = {k: v for k, v in model[kg].items() if k[0] != timer}
            model[kg].update(puts)
        for group, entries in model.items():
            found = store.read_entries("op", _wanted(group, every))
            assert dict(zip(zip(found["timer"].to_pylist(), found["field"].to_pylist(),
                                strict=True), found["value"].to_pylist(), strict=True)) == entries


def test_merges_found_together_keep_the_newest_of_entries_whose_hashes_collide() -> None:
    older = _run_with_hashes([(5, 1, "a", "old-a"), (5, 1, "b", "old-b"), (9, 1, "c", "c")])
    newer = _run_with_hashes([(5, 1, "b", "new-b"), (7, 1, "d", "d")])
    other = _run_with_hashes([(5, 1, "a", "other")])
    merged = live_entries_of_groups({3: [newer, older], 8: [other]})
    assert merged[3].to_pylist() == live_entries([newer, older]).to_pylist()
    assert sorted(merged[3]["value"].to_pylist()) == ["c", "d", "new-b", "old-a"]
    assert merged[8]["value"].to_pylist() == ["other"]
    plain = live_entries_of_groups({1: [newer, _run_with_hashes([(7, 1, "d", "old")])]})
    assert plain[1]["value"].to_pylist() == ["new-b", "d"]


def test_entries_are_ordered_by_group_then_whole_hash() -> None:
    rng = np.random.default_rng(3)
    groups = rng.integers(0, 32768, 5000)
    hashes = rng.integers(0, 2**64, 5000, dtype=np.uint64)
    # Hashes alike in their top 48 bits, so the quick key ties and the order must come
    # from the whole hash: in reverse in the input, in the same group.
    alike = np.array([0xABCDEF0000FF, 0xABCDEF000010, 0xABCDEF000001], np.uint64)
    hashes[:3] = alike << np.uint64(8)
    groups[:3] = 7
    for stable in (False, True):
        order = entry_order(groups, hashes, stable=stable)
        assert order.tolist() == np.lexsort((hashes, groups)).tolist()


def test_groups_the_quick_key_cannot_hold_are_ordered_too() -> None:
    groups = np.array([70_000, 5, 70_000, 65_536], np.int64)
    hashes = np.array([2, 9, 1, 4], np.uint64)
    assert entry_order(groups, hashes).tolist() == [1, 3, 2, 0]


def test_a_stable_order_keeps_equal_entries_in_their_order() -> None:
    groups = np.array([2, 1, 2, 1, 2], np.int64)
    hashes = np.array([9, 4, 9, 4, 3], np.uint64)
    assert entry_order(groups, hashes, stable=True).tolist() == [1, 3, 4, 0, 2]


def test_merges_keep_hash_order_where_hashes_differ_in_low_bits_only() -> None:
    # The newer run's hash is the largest: runs laid end to end are out of order in bits
    # the quick sort key leaves out.
    newer = _run_with_hashes([(0x1234_5678_9ABC_0030, 1, "a", "a")])
    older = _run_with_hashes([(0x1234_5678_9ABC_0010, 1, "c", "c"),
                              (0x1234_5678_9ABC_0020, 1, "b", "b")])
    merged = live_entries_of_groups({4: [newer, older]})[4]
    assert merged["h"].to_pylist() == sorted(merged["h"].to_pylist())
    assert merged["field"].to_pylist() == ["c", "b", "a"]


def _files(store, operator: str) -> set[str]:  # type: ignore[no-untyped-def]
    return set(os.listdir(os.path.join(store.runs_root, operator)))


def _named(store, operator: str) -> set[str]:  # type: ignore[no-untyped-def]
    query = "SELECT runs FROM keyed_groups WHERE operator = ?"
    rows = store._keyed_db().execute(query, (operator,))
    return {r.file for (text,) in rows for r in sqlite_keyed.runs_from_json(text) if r.file}


def test_files_no_group_names_are_collected(store) -> None:  # type: ignore[no-untyped-def]
    for epoch in range(40):
        puts = {(10, f"k{(epoch * 7 + i) % 50}"): str(epoch) for i in range(20)}
        store.commit_entries("op", epoch, {kg: KeyedChanges(puts=_puts(puts)) for kg in range(3)})
    # Merges replaced most runs; only the files the groups name are left.
    assert _files(store, "op") == _named(store, "op")
    assert 1 <= len(_files(store, "op")) < 20
    # What this process keeps mapped is what its last commit used: no deleted file among it.
    mapped = {p for p in sqlite_keyed._MAPPED if p.startswith(store.runs_root)}
    assert mapped and all(os.path.exists(p) for p in mapped)
    assert store.state_bytes("op") == sum(
        os.path.getsize(os.path.join(store.runs_root, "op", n)) for n in _named(store, "op")
    )


def test_a_commit_that_dies_before_its_transaction_leaves_the_state(store, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store.commit_entries("op", 1, {0: KeyedChanges(puts=_puts({(10, "a"): "one"}))})

    def dies(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError("killed")

    with monkeypatch.context() as patched:
        patched.setattr(type(store), "_save", dies)
        with pytest.raises(OSError):
            store.commit_entries("op", 2, {0: KeyedChanges(puts=_puts({(10, "a"): "two"}))})
    assert store.marks("op", [0]) == {0: 1}
    assert store.read_entries("op", _wanted(0, [(10, "a")]))["value"].to_pylist() == ["one"]
    orphans = _files(store, "op") - _named(store, "op")
    assert len(orphans) == 1  # the dead attempt's file, named by nothing
    # The replay commits; the next epoch's commit collects the dead attempt's file.
    store.commit_entries("op", 2, {0: KeyedChanges(puts=_puts({(10, "a"): "two"}))})
    assert orphans <= _files(store, "op")  # epoch 2's own files wait for a later epoch
    store.commit_entries("op", 3, {0: KeyedChanges(puts=_puts({(10, "b"): "three"}))})
    assert not orphans & _files(store, "op")
    assert store.read_entries("op", _wanted(0, [(10, "a")]))["value"].to_pylist() == ["two"]


def _commit_epochs(root: str, namespace: str, epochs: range) -> None:
    store = open_store(StoreSpec("sqlite", root, namespace))
    for epoch in epochs:
        puts = {(10, f"k{(epoch * 7 + i) % 50}"): str(epoch) for i in range(20)}
        store.commit_entries("op", epoch, {0: KeyedChanges(puts=_puts(puts))})


def test_files_another_process_deleted_do_not_stay_mapped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    namespace = f"runs-{uuid.uuid4().hex[:8]}"
    _commit_epochs(str(tmp_path), namespace, range(0, 5))
    store = open_store(StoreSpec("sqlite", str(tmp_path), namespace))
    store.read_entries("op", _wanted(0, [(10, "k1")]))  # maps the group's files here
    worker = multiprocessing.get_context("fork").Process(
        target=_commit_epochs, args=(str(tmp_path), namespace, range(5, 30))
    )
    worker.start()
    worker.join(60)
    assert worker.exitcode == 0
    # The other process merged and deleted the files mapped here; the next commit here
    # unmaps them (their disk space is freed once no process maps them).
    assert any(not os.path.exists(p) for p in sqlite_keyed._MAPPED if p.startswith(store.runs_root))
    store.read_entries("op", _wanted(0, [(10, "k1")]))
    store.commit_entries("op", 30, {1: KeyedChanges(puts=_puts({(10, "x"): "y"}))})
    mapped = [p for p in sqlite_keyed._MAPPED if p.startswith(store.runs_root)]
    assert mapped and all(os.path.exists(p) for p in mapped)


def test_an_operator_whose_windows_are_whole_groups_keeps_that_layout(store) -> None:  # type: ignore[no-untyped-def]
    """A run started before the embedded store chose sorted runs resumes on its state."""
    assert store.keyed_windows_for("counts")
    table = pa.table({"k": pa.array([1], pa.int64()), "__emitted": pa.array([False])})
    store.write_group("counts", 3, 7, table)
    assert not store.keyed_windows_for("counts")
    assert store.keyed_windows_for("other")
    store.delete_group("counts", 3)
    assert store.keyed_windows_for("counts")


def _sums(values: pa.Array, entry: np.ndarray) -> pa.Array:
    """A ``Combine`` of decimal counts: each entry's versions summed."""
    totals = np.zeros(int(entry.max()) + 1, np.int64)
    np.add.at(totals, entry, np.array(values.to_pylist(), np.int64))
    return pa.array([str(t) for t in totals.tolist()], pa.string())


def test_deltas_fold_down_to_the_newest_whole_value_and_fired_timers_hide_older() -> None:
    whole = _run_with_hashes([(1, 10, "a", "100"), (2, 10, "b", "7"), (3, 20, "c", "5")])
    older = _run_with_hashes([(1, 10, "a", "1000"), (4, 20, "d", "9")])  # under ``whole``
    first = _run_with_hashes([(1, 10, "a", "1"), (3, 20, "c", "2")])
    second = _run_with_hashes([(1, 10, "a", "10"), (2, 10, "b", "3")])
    for run in (first, second):
        run.run = Run("d", run.run.rows, delta=True)
    newest_first = [second, first, whole, older]
    live = live_entries(newest_first, combine=_sums)
    assert dict(zip(live["field"].to_pylist(), live["value"].to_pylist(), strict=True)) == {
        "a": "111", "b": "10", "c": "7", "d": "9"}
    assert live["h"].to_pylist() == sorted(live["h"].to_pylist())
    together = live_entries_of_groups({0: newest_first, 1: [second, first]}, combine=_sums)
    assert together[0].to_pylist() == live.to_pylist()
    assert dict(zip(together[1]["field"].to_pylist(), together[1]["value"].to_pylist(),
                    strict=True)) == {"a": "11", "b": "3", "c": "2"}
    fired = Run(None, 0, fired=(10,))  # window 10 fired after ``whole``, before ``second``
    due = live_entries([second, fired, first, whole], until=15, combine=_sums)
    assert dict(zip(due["field"].to_pylist(), due["value"].to_pylist(), strict=True)) == {
        "a": "10", "b": "3"}


def test_deltas_are_never_read_as_whole_values() -> None:
    delta = _run_with_hashes([(1, 10, "a", "1")])
    delta.run = Run("d", 1, delta=True)
    with pytest.raises(StreamRuntimeError, match="no combine"):
        live_entries([delta, _run_with_hashes([(1, 10, "a", "5")])])
    wanted = pa.table({"timer": pa.array([10], pa.int64()), "field": pa.array(["a"])})
    with pytest.raises(StreamRuntimeError, match="lookup reads whole values"):
        _find([delta], wanted, np.array([1], np.uint64))
    assert Run.from_json(Run("f", 3, (10,), 2, None, delta=True).as_json()) == Run(
        "f", 3, (10,), 2, None, delta=True)
    assert Run.from_json(Run("f", 3, (10,), 2, 40).as_json()) == Run("f", 3, (10,), 2, 40)


_DELTA_OPS = st.lists(
    st.tuples(
        st.integers(0, 2),  # key group
        st.dictionaries(
            st.tuples(st.sampled_from([10, 20, 30]), st.sampled_from(["a", "b", "c", "d", ""])),
            st.integers(1, 9),
            max_size=6,
        ),
        st.sets(st.sampled_from([10, 20, 30]), max_size=1),
    ),
    min_size=1,
    max_size=30,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_DELTA_OPS, whole_first=st.integers(0, 8))
def test_deltas_after_any_commits_fold_like_a_map_of_sums(runs_store, ops, whole_first) -> None:  # type: ignore[no-untyped-def]
    """The first ``whole_first`` commits put whole values (state kept from before its
    operator put deltas), the others deltas; with the merges they cause, due timers read
    like a dict of sums. A group's runs that hold deltas refuse a lookup."""
    store = runs_store
    store.clear()
    model: dict[int, dict[tuple[int, str], int]] = {0: {}, 1: {}, 2: {}}
    for epoch, (kg, puts, fired) in enumerate(ops):
        change = KeyedChanges(puts=_puts({k: str(v) for k, v in puts.items()}) if puts else None,
                              fired=tuple(sorted(fired)))
        deltas = epoch >= whole_first
        store.commit_entries("op", epoch, {kg: change}, _sums if deltas else None)
        for timer in fired:
            model[kg] = {k: v for k, v in model[kg].items() if k[0] != timer}
        for key, value in puts.items():
            model[kg][key] = model[kg].get(key, 0) + value if deltas else value
        for group in model:
            due = store.fire_timers("op", [group], 20, _sums)
            assert dict(zip(zip(due["timer"].to_pylist(), due["field"].to_pylist(), strict=True),
                            map(int, due["value"].to_pylist()), strict=True)) == {
                k: v for k, v in model[group].items() if k[0] <= 20}
            every = store.fire_timers("op", [group], 30, _sums)
            assert len(every) == len(model[group])
    for epoch in (len(ops), len(ops) + 1):  # a new group: whole values, then deltas
        store.commit_entries("op", epoch, {3: KeyedChanges(puts=_puts({(10, "z"): "1"}))}, _sums)
    with pytest.raises(StreamRuntimeError, match="lookup reads whole values"):
        store.read_entries("op", _wanted(3, [(10, "z")]))


def test_a_merge_taking_in_whole_values_over_older_ones_takes_all(runs_store) -> None:  # type: ignore[no-untyped-def]
    """Kept from before deltas: a large run, then a small one that replaced one of its
    entries. Deltas then merge with the small one: the merge takes in the large one too,
    else the merged run would hold both whole values and deltas."""
    store = runs_store
    large = {(10, f"k{i}"): "100" for i in range(12)}
    store.commit_entries("op", 0, {0: KeyedChanges(puts=_puts(large))})
    store.commit_entries("op", 1, {0: KeyedChanges(puts=_puts({(10, "k0"): "5"}))})
    for epoch in (2, 3):
        store.commit_entries("op", epoch, {0: KeyedChanges(puts=_puts({(10, "k0"): "1",
                                                                      (10, "k1"): "1"}))}, _sums)
    due = store.fire_timers("op", [0], 10, _sums)
    values = dict(zip(due["field"].to_pylist(), map(int, due["value"].to_pylist()), strict=True))
    assert values == {**{f"k{i}": 100 for i in range(12)}, "k0": 7, "k1": 102}
    (row,) = store._rows("op", [0]).values()
    assert [(run.rows, run.delta) for run in row.runs] == [(12, False)]


_RUN = st.one_of(
    # A run of entries (timer, field -> count), whole values or deltas, and its fired timers.
    st.tuples(
        st.dictionaries(st.tuples(st.sampled_from([10, 20, 30]), st.sampled_from("abcd")),
                        st.integers(1, 9), min_size=1, max_size=6),
        st.booleans(),
        st.sets(st.sampled_from([10, 20, 30]), max_size=1),
    ),
    # Fired timers alone.
    st.sets(st.sampled_from([10, 20, 30]), min_size=1, max_size=2),
)


def _made_run(made: Any) -> Loaded | Run:
    if isinstance(made, (set, frozenset)):
        return Run(None, 0, tuple(sorted(made)))
    entries, delta, fired = made
    timers = pa.array([t for t, _ in entries], pa.int64())
    fields = pa.array([f for _, f in entries], pa.string())
    hashes = entry_hashes(timers, fields)
    loaded = _run_with_hashes([(int(h), t, f, str(entries[(t, f)]))
                               for h, (t, f) in zip(hashes, entries, strict=True)])
    loaded.run = Run("f", len(entries), tuple(sorted(fired)), delta=delta)
    return loaded


@settings(max_examples=150, deadline=None)
@given(groups=st.dictionaries(st.integers(0, 5), st.lists(_RUN, min_size=1, max_size=4),
                              min_size=1, max_size=4),
       until=st.sampled_from([None, 15, 25, 35]))
def test_entries_found_together_are_each_groups_own(groups, until) -> None:  # type: ignore[no-untyped-def]
    """Merges and fired timers of several groups found in one sort, fired timers hiding
    older entries and deltas folded, are what each group's runs hold on their own."""
    runs = {kg: [_made_run(made) for made in made_runs] for kg, made_runs in groups.items()}
    together = live_entries_of_groups(runs, until, combine=_sums)
    for kg, newest_first in runs.items():
        assert together[kg].to_pylist() == live_entries(
            newest_first, until, combine=_sums).to_pylist()
