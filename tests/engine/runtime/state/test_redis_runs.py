"""The Redis store's sorted runs: what Redis and the local cache of runs hold, a reader on
another machine (an empty cache), and the packed format of a run in Redis."""

from __future__ import annotations

import os
import shutil
import uuid

import pyarrow as pa
import pytest
import redis

from engine.runtime.errors import StreamRuntimeError
from engine.runtime.state import KeyedChanges, redis_store
from engine.runtime.state.redis_store import RedisStateStore


def _puts(pairs: dict[str, str], timer: int = 10) -> pa.Table:
    return pa.table({
        "timer": pa.array([timer] * len(pairs), pa.int64()),
        "field": pa.array(list(pairs), pa.string()),
        "value": pa.array(list(pairs.values()), pa.string()),
    })


def _wanted(kg: int, fields: list[str]) -> pa.Table:
    return pa.table({
        "kg": pa.array([kg] * len(fields), pa.int32()),
        "field": pa.array(fields, pa.string()),
    })


def _values(store, kg: int, fields: list[str]) -> dict[str, str]:  # type: ignore[no-untyped-def]
    found = store.read_entries("op", _wanted(kg, fields))
    return dict(zip(found["field"].to_pylist(), found["value"].to_pylist(), strict=True))


@pytest.fixture
def namespace(redis_url: str):  # type: ignore[no-untyped-def]
    name = f"runs-{uuid.uuid4().hex[:8]}"
    yield name
    client = redis.Redis.from_url(redis_url)
    for pattern in (f"{name}:*", f"{{{name}:*"):
        for key in client.scan_iter(match=pattern, count=1000):
            client.delete(key)


def _machine(redis_url: str, namespace: str, cache: str) -> RedisStateStore:
    """The store as an instance on a machine of its own sees it: its own cache folder."""
    store = RedisStateStore(redis_url, namespace)
    store.cache_root = cache
    return store


def _commit_epochs(store, epochs: range, groups: range) -> None:  # type: ignore[no-untyped-def]
    for epoch in epochs:
        puts = {f"k{(epoch * 7 + i) % 50}": str(epoch) for i in range(20)}
        store.commit_entries("op", epoch, {kg: KeyedChanges(puts=_puts(puts)) for kg in groups})


def test_redis_and_the_cache_hold_only_the_runs_groups_name(redis_url, namespace, tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = _machine(redis_url, namespace, str(tmp_path / "cache"))
    _commit_epochs(store, range(40), range(3))
    client = redis.Redis.from_url(redis_url)
    named = {(kg, f"{run.file}.{run.batch}")
             for kg, row in store._rows("op", range(3)).items() for run in row.runs}
    stored = {(int(key.split(b":")[2].rstrip(b"}")), key.decode().rsplit(":r:", 1)[1])
              for key in client.scan_iter(match=f"{{{namespace}:op:*}}:r:*")}
    assert stored == named and 3 <= len(named) < 30  # merged runs were deleted from Redis
    cached = set(os.listdir(store._cache_dir("op")))
    assert cached <= {name.split(".")[0] for _, name in named}
    assert 1 <= len(cached) < 20
    assert store.groups("op") == {0, 1, 2}


def test_a_commit_of_many_groups_is_one_transaction(redis_url, namespace, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Redis syncs its append-only file once per transaction, and after each piece of a plain
    pipeline that wrote: a commit of an instance's groups is one MULTI/EXEC."""
    store = _machine(redis_url, namespace, str(tmp_path / "cache"))
    _commit_epochs(store, range(1), range(16))  # the script is loaded

    def calls() -> dict[str, int]:
        stats = redis.Redis.from_url(redis_url).info("commandstats")
        return {name: int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))
                for name in ("exec", "evalsha")}

    before = calls()
    _commit_epochs(store, range(1, 2), range(16))
    after = calls()
    assert after["evalsha"] - before["evalsha"] == 16  # one script per group
    assert after["exec"] - before["exec"] == 1
    assert store.marks("op", range(16)) == dict.fromkeys(range(16), 1)


def test_an_instance_on_another_machine_reads_the_runs_from_redis(  # type: ignore[no-untyped-def]
    redis_url, namespace, tmp_path
) -> None:
    here = _machine(redis_url, namespace, str(tmp_path / "here"))
    _commit_epochs(here, range(12), range(2))
    fields = [f"k{i}" for i in range(50)]
    expected = _values(here, 1, fields)
    there = _machine(redis_url, namespace, str(tmp_path / "there"))
    before = there.bytes_read
    assert _values(there, 1, fields) == expected  # fetched: its cache was empty
    fetched = there.bytes_read - before
    assert fetched > sum(len(v) for v in expected.values())
    assert _values(there, 1, fields) == expected
    assert there.bytes_read - before - fetched < fetched  # the second read hit the cache
    # The group moves there (a rescale): its commits there are read back here.
    there.commit_entries("op", 12, {1: KeyedChanges(puts=_puts({"k1": "moved"}))})
    assert _values(here, 1, ["k1", "k2"]) == {"k1": "moved", "k2": expected["k2"]}
    assert there.marks("op", [0, 1]) == {0: 11, 1: 12}


def test_a_lost_cache_is_fetched_again(redis_url, namespace, tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = _machine(redis_url, namespace, str(tmp_path / "cache"))
    _commit_epochs(store, range(6), range(2))
    expected = _values(store, 0, [f"k{i}" for i in range(50)])
    shutil.rmtree(store.cache_root)
    assert _values(store, 0, [f"k{i}" for i in range(50)]) == expected


def test_redis_holds_runs_packed_and_compressed(  # type: ignore[no-untyped-def]
    redis_url, namespace, tmp_path
) -> None:
    store = _machine(redis_url, namespace, str(tmp_path / "cache"))
    puts = {f"key-{i:05d}": "1" for i in range(2000)}
    store.commit_entries("op", 0, {0: KeyedChanges(puts=_puts(puts))})
    client = redis.Redis.from_url(redis_url)
    (key,) = client.scan_iter(match=f"{{{namespace}:op:0}}:r:*")
    stored = client.get(key)
    assert stored is not None and stored.startswith(b"SRP1")
    table = redis_store._run_table(stored).select(["timer", "field", "value"])
    assert table.num_rows == 2000 and set(table["field"].to_pylist()) == set(puts)
    ipc = pa.BufferOutputStream()
    with pa.ipc.new_file(ipc, table.schema,
                         options=pa.ipc.IpcWriteOptions(compression="zstd")) as writer:
        writer.write_table(table)
    # Packed, the run takes under half the bytes of its IPC file with compressed buffers.
    assert len(stored) < ipc.getvalue().size / 2


def test_a_group_changed_under_a_commit_is_refused(  # type: ignore[no-untyped-def]
    redis_url, namespace, tmp_path, monkeypatch
) -> None:
    store = _machine(redis_url, namespace, str(tmp_path / "cache"))
    other = _machine(redis_url, namespace, str(tmp_path / "other"))
    _commit_epochs(store, range(3), range(1))
    planned = type(store)._merged

    def other_commits_meanwhile(*args):  # type: ignore[no-untyped-def]
        runs = planned(store, *args)
        other.commit_entries("op", 3, {0: KeyedChanges(puts=_puts({"y": "other"}))})
        return runs

    monkeypatch.setattr(store, "_merged", other_commits_meanwhile)
    with pytest.raises(StreamRuntimeError, match="key group 0 of 'op' changed under the commit"):
        store.commit_entries("op", 4, {0: KeyedChanges(puts=_puts({"x": "mine"}))})
    monkeypatch.undo()
    assert store.marks("op", [0]) == {0: 3}
    assert _values(store, 0, ["x", "y"]) == {"y": "other"}


def test_a_packed_run_reads_back_as_written_and_refuses_nulls() -> None:
    table = pa.table({
        "h": pa.array([3, 1, 2, 9], pa.uint64()),
        "timer": pa.array([-5, 0, 2**40, 7], pa.int64()),
        "field": pa.array(["", "é|x", "a" * 300, "b"], pa.string()),
        "value": pa.array(["v1", "", "n", "v2"], pa.string()),
    }).slice(1)  # a slice, as a commit's runs are of the table it sorted
    back = redis_store._run_table(redis_store._stored(table))
    assert back.select(["timer", "field", "value"]).to_pylist() == table.select(
        ["timer", "field", "value"]).to_pylist()
    nulls = table.set_column(3, "value", pa.array(["v", None, "w"], pa.string()))
    with pytest.raises(StreamRuntimeError, match="value column holds nulls"):
        redis_store._stored(nulls)
