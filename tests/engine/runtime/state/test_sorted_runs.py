"""The layout as sorted runs: keys found by hash, newest version first, expiry hiding older
runs' entries, runs merged size-tiered and deltas folded; committed per key group with the
mark, and files no group names collected."""

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

from engine.runtime.state import KeyedChanges, StoreSpec, open_store, sqlite_store
from engine.runtime.state.runs_store import runs_from_json
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
    live_entries_of_groups,
    runs_to_merge,
    write_runs,
)


def _puts(entries: dict[str, tuple[int, str]]) -> pa.Table:
    """Puts of key -> (timer, value)."""
    return pa.table(
        {
            "timer": pa.array([t for t, _ in entries.values()], pa.int64()),
            "field": pa.array(list(entries), pa.string()),
            "value": pa.array([v for _, v in entries.values()], pa.string()),
        }
    )


def _wanted(kg: int, fields: list[str]) -> pa.Table:
    return pa.table({"kg": pa.array([kg] * len(fields), pa.int32()),
                     "field": pa.array(fields, pa.string())})


def _read(store: Any, kg: int, fields: list[str]) -> dict[str, tuple[int, str]]:
    found = store.read_entries("op", _wanted(kg, fields))
    return {f: (t, v) for f, t, v in zip(found["field"].to_pylist(), found["timer"].to_pylist(),
                                         found["value"].to_pylist(), strict=True)}


def test_hashes_depend_on_the_key_only() -> None:
    fields = pa.array(["", "a", "ab", "ba", "b", "x" * 300], pa.string())
    hashes = entry_hashes(fields)
    assert len(set(hashes.tolist())) == 6
    # The same keys at an offset into a larger array, and in another order, hash the same.
    padded = pa.array(["zz", "", "a", "ab", "ba", "b", "x" * 300], pa.string()).slice(1)
    assert entry_hashes(padded).tolist() == hashes.tolist()
    assert entry_hashes(fields[::-1]).tolist() == hashes[::-1].tolist()
    # Short strings alone are hashed position by position, beside a long one all at once:
    # both ways give the same hashes.
    assert entry_hashes(fields[:5]).tolist() == hashes[:5].tolist()


def _run_with_hashes(entries: list[tuple[int, int, str, str]]) -> Loaded:
    """A run of (hash, timer, key, value) whose hashes are given, sorted by them (to force
    collisions)."""
    entries = sorted(entries)
    table = pa.Table.from_arrays(
        [pa.array([e[i] for e in entries], kind) for i, kind in
         enumerate((pa.uint64(), pa.int64(), pa.string(), pa.string()))],
        schema=RUN_SCHEMA,
    )
    return Loaded(Run("f", len(entries)), table, table[HASH].to_numpy(), table["timer"].to_numpy())


def _find(newest_first: list[Loaded | Run], fields: list[str], hashes: list[int]) -> dict:  # type: ignore[type-arg]
    """What ``find`` finds in one group (``hashes`` sorted): position -> (timer, value)."""
    at, rows = find([Span(newest_first, 0, len(hashes))], pa.array(fields, pa.string()),
                    np.array(hashes, np.uint64))
    return dict(zip(at.tolist(), zip(rows["timer"].to_pylist(), rows["value"].to_pylist(),
                                     strict=True), strict=True))


def test_keys_whose_hashes_collide_are_told_apart() -> None:
    # All three wanted keys and the stored ones share one hash: only the key tells.
    run = _run_with_hashes([(7, 5, "c", "vc"), (7, 5, "a", "va"), (7, 6, "d", "vd")])
    assert _find([run], ["a", "b", "c"], [7, 7, 7]) == {0: (5, "va"), 2: (5, "vc")}
    old = _run_with_hashes([(7, 10, "a", "old a"), (7, 10, "b", "b"), (9, 10, "c", "old c")])
    new = _run_with_hashes([(7, 10, "a", "new a"), (7, 10, "d", "d"), (9, 10, "c", "new c")])
    merged = live_entries_of_groups({0: [new, old]})[0]
    assert sorted(zip(merged["field"].to_pylist(), merged["value"].to_pylist(),
                      strict=True)) == [("a", "new a"), ("b", "b"), ("c", "new c"), ("d", "d")]
    assert merged["h"].to_pylist() == sorted(merged["h"].to_pylist())


def test_the_newest_version_wins_and_expiry_hides_older_runs_entries() -> None:
    old = _run_with_hashes([(1, 10, "a", "old"), (2, 20, "b", "old"), (3, 10, "c", "old"),
                            (4, 10, "d", "old")])
    moved = _run_with_hashes([(4, 30, "d", "moved")])  # d's timer moved past the expiry
    new = _run_with_hashes([(1, 10, "a", "new")])
    expired = Run(None, 0, expire=10)  # after ``moved``, before ``new`` was put
    newest_first = [new, expired, moved, old]
    assert _find(newest_first, ["a", "b", "c", "d"], [1, 2, 3, 4]) == {
        0: (10, "new"), 1: (20, "old"), 3: (30, "moved")}
    live = live_entries_of_groups({0: newest_first})[0]
    assert sorted(zip(live["field"].to_pylist(), live["value"].to_pylist(), strict=True)) == [
        ("a", "new"), ("b", "old"), ("d", "moved")]
    assert live_entries_of_groups({0: newest_first}, until=15)[0]["field"].to_pylist() == ["a"]
    # An expired newest version hides the key, whatever older runs hold of it.
    again = _run_with_hashes([(2, 5, "b", "gone")])
    assert _find([Run(None, 0, expire=6), again, old], ["b"], [2]) == {}


def test_runs_merge_size_tiered() -> None:
    # Three runs of one size merge; runs of another size in between keep them apart.
    assert runs_to_merge([Run("a", 1000), Run("b", 10), Run("c", 10)]) == 0
    assert runs_to_merge([Run("a", 1000), Run("b", 10), Run("c", 12), Run("d", 10)]) == 3
    assert runs_to_merge([Run("a", 10), Run("b", 100), Run("c", 10), Run("d", 10)]) == 0
    assert runs_to_merge([Run("a", 10), Run("b", 10), Run("c", 25)]) == 0
    # The merged run merges again with two runs of its size before it.
    assert runs_to_merge([Run("a", 900), Run("b", 30), Run("c", 30), Run("d", 10),
                          Run("e", 10), Run("f", 10)]) == 5
    # A run of no entries fits any size.
    assert runs_to_merge([Run("a", 10), Run(None, 0, expire=5), Run("c", 10)]) == 3
    assert runs_to_merge([Run(str(i), 1000 >> i) for i in range(15)]) == 15


def _sorted_run(entries: dict[str, tuple[int, str]]) -> pa.Table:
    puts = _puts(entries)
    hashes = entry_hashes(puts["field"])
    order = np.argsort(hashes)
    return pa.Table.from_arrays(
        [pa.array(hashes[order]), *[puts[n].take(pa.array(order)) for n in puts.column_names]],
        schema=RUN_SCHEMA)


def test_groups_whose_runs_share_a_batch_are_found_together(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """One commit's runs of three groups are one record batch; an older run of group 0 is a
    file of its own (as the Redis store caches a run it fetched)."""
    tables = [_sorted_run({"a": (10, "new a"), "b": (10, "b0")}), _sorted_run({"a": (10, "a1")}),
              _sorted_run({"c": (20, "c2"), "a": (10, "a2")})]
    write_runs(str(tmp_path / "new"), tables)
    starts = np.cumsum([0] + [t.num_rows for t in tables]).tolist()
    newest = [Run(str(tmp_path / "new"), t.num_rows, batch=i, start=starts[i], first=10)
              for i, t in enumerate(tables)]
    write_runs(str(tmp_path / "old"), [_sorted_run({"a": (10, "old a"), "z": (10, "z0")})])
    before = Run(str(tmp_path / "old"), 2, batch=3, start=40)  # fetched: the file's only run
    assert Run.from_json(newest[2].as_json()) == newest[2]
    files = {path: RunFile(path) for path in (str(tmp_path / "new"), str(tmp_path / "old"))}
    runs = {0: [before, newest[0]], 1: [newest[1]], 2: [newest[2]]}  # oldest first
    loaded = {kg: [files[str(r.file)].loaded(r, alone=r is before) for r in group]
              for kg, group in runs.items()}
    assert loaded[0][1].in_batch()[0] is loaded[2][0].in_batch()[0]  # one batch
    wanted = {0: ["a", "b", "z", "q"], 1: ["a", "b"], 2: ["a", "c", "d"]}
    spans, fields, hashes, keys = [], [], [], []
    for kg, names in wanted.items():
        entry = entry_hashes(pa.array(names))
        order = np.argsort(entry)
        spans.append(Span(loaded[kg][::-1], len(hashes), len(hashes) + len(names)))
        hashes += entry[order].tolist()
        keys += [(kg, names[i]) for i in order]
        fields += [names[i] for i in order]
    at, rows = find(spans, pa.array(fields), np.array(hashes, np.uint64))
    found = {keys[i]: value for i, value in zip(at.tolist(), rows["value"].to_pylist(),
                                                strict=True)}
    assert found == {(0, "a"): "new a", (0, "b"): "b0", (0, "z"): "z0", (1, "a"): "a1",
                     (2, "a"): "a2", (2, "c"): "c2"}


@pytest.fixture
def store(tmp_path):  # type: ignore[no-untyped-def]
    opened = open_store(StoreSpec("sqlite", str(tmp_path), f"runs-{uuid.uuid4().hex[:8]}"))
    yield opened
    opened.clear()


@pytest.fixture(params=["sqlite", "redis", "memory"])
def runs_store(request, tmp_path, redis_url):  # type: ignore[no-untyped-def]
    """Each store (Redis's runs cached in a folder of the test's)."""
    location = {"sqlite": str(tmp_path), "redis": redis_url, "memory": ""}[request.param]
    opened = open_store(StoreSpec(request.param, location, f"runs-{uuid.uuid4().hex[:8]}"))
    if request.param == "redis":
        opened.cache_root = str(tmp_path / "cache")
    yield opened
    opened.clear()


KEYS = ["a", "b", "c", "d", ""]
_COMMITS = st.lists(
    st.dictionaries(
        st.integers(0, 3),  # key group
        st.tuples(
            st.dictionaries(st.sampled_from(KEYS),
                            st.tuples(st.sampled_from([10, 20, 30]), st.text("xyz", min_size=1,
                                                                             max_size=3)),
                            max_size=4),
            st.sampled_from([None, None, 10, 20]),  # expire
        ),
        min_size=1,
    ),
    min_size=1,
    max_size=20,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(commits=_COMMITS)
def test_reads_after_any_commits_equal_a_plain_map(runs_store, commits) -> None:  # type: ignore[no-untyped-def]
    """Puts (a key's timer moving later, never earlier) and expiries of several groups in
    any order, with the merges they cause, read like a dict, by key and as a whole."""
    store = runs_store
    store.clear()
    model: dict[int, dict[str, tuple[int, str]]] = {kg: {} for kg in range(4)}
    for epoch, commit in enumerate(commits):
        changes = {}
        for kg, (puts, expire) in commit.items():
            if expire is not None:  # expired before the puts of the same commit
                model[kg] = {k: tv for k, tv in model[kg].items() if tv[0] > expire}
            puts = {k: (max(t, model[kg].get(k, (t, ""))[0]), v) for k, (t, v) in puts.items()}
            model[kg].update(puts)
            changes[kg] = KeyedChanges(puts=_puts(puts) if puts else None, expire=expire)
        store.commit_entries("op", epoch, changes)
        for kg, entries in model.items():
            assert _read(store, kg, KEYS) == entries
            every = store.fire_timers("op", [kg], 2**62)
            assert sorted(every["field"].to_pylist()) == sorted(entries)


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
    stable = entry_order(np.array([2, 1, 2, 1, 2]), np.array([9, 4, 9, 4, 3], np.uint64),
                         stable=True)
    assert stable.tolist() == [1, 3, 4, 0, 2]


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
    return set(os.listdir(store._operator_dir(operator)))


def _named(store, operator: str) -> set[str]:  # type: ignore[no-untyped-def]
    query = "SELECT runs FROM keyed_groups WHERE operator = ?"
    rows = store._keyed_db().execute(query, (operator,))
    return {r.file for (text,) in rows for r in runs_from_json(text) if r.file}


def _epoch_puts(epoch: int) -> pa.Table:
    return _puts({f"k{(epoch * 7 + i) % 50}": (10, str(epoch)) for i in range(20)})


def test_files_no_group_names_are_collected(store) -> None:  # type: ignore[no-untyped-def]
    for epoch in range(40):
        store.commit_entries("op", epoch, {kg: KeyedChanges(_epoch_puts(epoch)) for kg in range(3)})
    # Merges replaced most runs; only the files the groups name are left.
    assert _files(store, "op") == _named(store, "op")
    assert 1 <= len(_files(store, "op")) < 20
    # What this process keeps mapped is what its last commit used: no deleted file among it.
    mapped = {p for p in sqlite_store._MAPPED if p.startswith(store.runs_root)}
    assert mapped and all(os.path.exists(p) for p in mapped)


def test_a_commit_that_dies_before_its_transaction_leaves_the_state(store, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store.commit_entries("op", 1, {0: KeyedChanges(puts=_puts({"a": (10, "one")}))})

    def dies(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError("killed")

    with monkeypatch.context() as patched:
        patched.setattr(type(store), "_save", dies)
        with pytest.raises(OSError):
            store.commit_entries("op", 2, {0: KeyedChanges(puts=_puts({"a": (10, "two")}))})
    assert store.marks("op", [0]) == {0: 1}
    assert _read(store, 0, ["a"]) == {"a": (10, "one")}
    orphans = _files(store, "op") - _named(store, "op")
    assert len(orphans) == 1  # the dead attempt's file, named by nothing
    # The replay commits; the next epoch's commit collects the dead attempt's file.
    store.commit_entries("op", 2, {0: KeyedChanges(puts=_puts({"a": (10, "two")}))})
    assert orphans <= _files(store, "op")  # epoch 2's own files wait for a later epoch
    store.commit_entries("op", 3, {0: KeyedChanges(puts=_puts({"b": (10, "three")}))})
    assert not orphans & _files(store, "op")
    assert _read(store, 0, ["a"]) == {"a": (10, "two")}


def _commit_epochs(root: str, namespace: str, epochs: range) -> None:
    store = open_store(StoreSpec("sqlite", root, namespace))
    for epoch in epochs:
        store.commit_entries("op", epoch, {0: KeyedChanges(puts=_epoch_puts(epoch))})


def test_files_another_process_deleted_do_not_stay_mapped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    namespace = f"runs-{uuid.uuid4().hex[:8]}"
    _commit_epochs(str(tmp_path), namespace, range(0, 5))
    store = open_store(StoreSpec("sqlite", str(tmp_path), namespace))
    _read(store, 0, ["k1"])  # maps the group's files here
    worker = multiprocessing.get_context("fork").Process(
        target=_commit_epochs, args=(str(tmp_path), namespace, range(5, 30))
    )
    worker.start()
    worker.join(60)
    assert worker.exitcode == 0
    # The other process merged and deleted the files mapped here; the next commit here
    # unmaps them (their disk space is freed once no process maps them).
    assert any(not os.path.exists(p) for p in sqlite_store._MAPPED
               if p.startswith(store.runs_root))
    _read(store, 0, ["k1"])
    store.commit_entries("op", 30, {1: KeyedChanges(puts=_puts({"x": (10, "y")}))})
    mapped = [p for p in sqlite_store._MAPPED if p.startswith(store.runs_root)]
    assert mapped and all(os.path.exists(p) for p in mapped)


def _sums(values: pa.Array, entry: np.ndarray) -> pa.Array:
    """A ``Combine`` of decimal counts: each entry's versions summed."""
    totals = np.zeros(int(entry.max()) + 1, np.int64)
    np.add.at(totals, entry, np.array(values.to_pylist(), np.int64))
    return pa.array([str(t) for t in totals.tolist()], pa.string())


def test_deltas_fold_all_their_versions_and_expiry_hides_older() -> None:
    older = _run_with_hashes([(1, 10, "a", "1000"), (4, 20, "d", "9")])
    first = _run_with_hashes([(1, 10, "a", "1"), (3, 20, "c", "2")])
    second = _run_with_hashes([(1, 10, "a", "10"), (2, 10, "b", "3")])
    together = live_entries_of_groups({0: [second, first, older], 1: [second, first]},
                                      combine=_sums)
    assert dict(zip(together[0]["field"].to_pylist(), together[0]["value"].to_pylist(),
                    strict=True)) == {"a": "1011", "b": "3", "c": "2", "d": "9"}
    assert together[0]["h"].to_pylist() == sorted(together[0]["h"].to_pylist())
    assert dict(zip(together[1]["field"].to_pylist(), together[1]["value"].to_pylist(),
                    strict=True)) == {"a": "11", "b": "3", "c": "2"}
    expired = Run(None, 0, expire=10)  # window 10 closed after ``first``, before ``second``
    due = live_entries_of_groups({0: [second, expired, first, older]}, until=15,
                                 combine=_sums)[0]
    assert dict(zip(due["field"].to_pylist(), due["value"].to_pylist(), strict=True)) == {
        "a": "10", "b": "3"}
    assert Run.from_json(Run("f", 3, 10, 2, 40, 7).as_json()) == Run("f", 3, 10, 2, 40, 7)


_DELTA_OPS = st.lists(
    st.tuples(
        st.integers(0, 2),  # key group
        st.dictionaries(
            st.tuples(st.sampled_from([10, 20, 30]), st.sampled_from(["a", "b", "c", "d", ""])),
            st.integers(1, 9),
            max_size=6,
        ),
        st.sampled_from([None, None, 10, 20]),  # windows closed: expire
    ),
    min_size=1,
    max_size=30,
)


def _window_puts(entries: dict[tuple[int, str], str]) -> pa.Table:
    """A window's entries: the key names its window (timer) too, which never moves."""
    return _puts({f"{t}:{f}": (t, v) for (t, f), v in entries.items()})


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_DELTA_OPS)
def test_deltas_after_any_commits_fold_like_a_map_of_sums(runs_store, ops) -> None:  # type: ignore[no-untyped-def]
    """Deltas put in any order, with the expiries and merges they cause, read as due timers
    like a dict of sums."""
    store = runs_store
    store.clear()
    model: dict[int, dict[tuple[int, str], int]] = {0: {}, 1: {}, 2: {}}
    for epoch, (kg, puts, expire) in enumerate(ops):
        change = KeyedChanges(
            puts=_window_puts({k: str(v) for k, v in puts.items()}) if puts else None,
            expire=expire)
        store.commit_entries("op", epoch, {kg: change}, _sums)
        if expire is not None:
            model[kg] = {k: v for k, v in model[kg].items() if k[0] > expire}
        for key, value in puts.items():
            model[kg][key] = model[kg].get(key, 0) + value
        for group in model:
            due = store.fire_timers("op", [group], 20, _sums)
            assert dict(zip(due["field"].to_pylist(), map(int, due["value"].to_pylist()),
                            strict=True)) == {
                f"{t}:{f}": v for (t, f), v in model[group].items() if t <= 20}
            every = store.fire_timers("op", [group], 30, _sums)
            assert len(every) == len(model[group])


_RUN = st.one_of(
    # A run of entries (window, key -> count) and its expiry.
    st.tuples(
        st.dictionaries(st.tuples(st.sampled_from([10, 20, 30]), st.sampled_from("abcd")),
                        st.integers(1, 9), min_size=1, max_size=6),
        st.sampled_from([None, 10, 20]),
    ),
    st.sampled_from([10, 20, 30]),  # an expiry alone
)


def _made_run(made: Any) -> Loaded | Run:
    if isinstance(made, int):
        return Run(None, 0, made)
    entries, expire = made
    fields = [f"{t}:{f}" for t, f in entries]
    hashes = entry_hashes(pa.array(fields, pa.string()))
    loaded = _run_with_hashes([(int(h), t, name, str(entries[(t, f)])) for h, name, (t, f)
                               in zip(hashes, fields, entries, strict=True)])
    loaded.run = Run("f", len(entries), expire)
    return loaded


@settings(max_examples=150, deadline=None)
@given(groups=st.dictionaries(st.integers(0, 5), st.lists(_RUN, min_size=1, max_size=4),
                              min_size=1, max_size=4),
       until=st.sampled_from([None, 15, 25, 35]))
def test_entries_found_together_are_each_groups_own(groups, until) -> None:  # type: ignore[no-untyped-def]
    """Merges and due timers of several groups found in one sort, expiry hiding older
    entries and deltas folded, are what each group's runs hold on their own."""
    runs = {kg: [_made_run(made) for made in made_runs] for kg, made_runs in groups.items()}
    together = live_entries_of_groups(runs, until, combine=_sums)
    for kg, newest_first in runs.items():
        alone = live_entries_of_groups({kg: newest_first}, until, combine=_sums)[kg]
        assert together[kg].to_pylist() == alone.to_pylist()


def test_expiries_without_puts_add_one_run_at_most_and_leave_the_large_run(runs_store) -> None:  # type: ignore[no-untyped-def]
    """Epochs that only expire keep one run of no entries at the group's end: runs of no
    entries piling up would merge the group's large run for nothing."""
    store = runs_store
    store.commit_entries("op", 0, {0: KeyedChanges(_puts({f"k{i}": (100 + i, "v")
                                                          for i in range(50)}))})
    for epoch in range(1, 8):
        store.commit_entries("op", epoch, {0: KeyedChanges(expire=100 + epoch)})
    store.commit_entries("op", 8, {0: KeyedChanges(expire=103)})  # hides nothing new
    (row,) = store._rows("op", [0]).values()
    assert row.epoch == 8
    assert [(run.rows, run.expire, run.first) for run in row.runs] == [(50, None, 100),
                                                                       (0, 107, None)]
    assert set(_read(store, 0, [f"k{i}" for i in range(50)])) == {f"k{i}" for i in range(8, 50)}
