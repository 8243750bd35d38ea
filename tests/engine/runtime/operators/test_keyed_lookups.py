"""Dedupe and join instances look up their input's keys only: an owned key group that
holds state but has no input in an epoch is neither read nor rewritten; a replayed epoch
re-emits what it emitted and changes nothing twice; expired keys leave with a commit."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from bench.instances import keyed_task
from engine.runtime.operators.columns import KG, TIME_US
from engine.runtime.operators.dedupe import parse_dedupe_spec
from engine.runtime.operators.dedupe_worker import process_dedupe_instance
from engine.runtime.operators.join import SIDE, parse_join_spec
from engine.runtime.operators.join_worker import process_join_instance
from engine.runtime.stage.vsn_worker import InstanceReport
from engine.runtime.state import StoreSpec, open_store
from engine.runtime.state.memory import MemoryStateStore

DEDUPE = parse_dedupe_spec("d", {"key": ["k"], "time": "t", "within": "10 microseconds"})
JOIN = parse_join_spec("j", {"key": ["k"], "time": "t", "within": "10 microseconds"}).with_layout(
    ["k", "t", "a"], ["k", "t", "b"])
DEDUPE_OUT = pa.schema([("k", pa.int64()), ("t", pa.int64())])
JOIN_OUT = pa.schema([("k", pa.int64()), ("t", pa.int64()), ("a", pa.string()),
                      ("b", pa.string())])
OWNERS = (0, 0, 0, 0)


class CountingStore(MemoryStateStore):
    """Records the key groups each epoch looks up and commits."""

    def __init__(self) -> None:
        super().__init__()
        self.read: set[int] = set()
        self.committed: set[int] = set()

    def read_entries(self, operator: str, wanted: pa.Table) -> pa.Table:
        self.read |= set(wanted["kg"].to_pylist())
        return super().read_entries(operator, wanted)

    def commit_entries(self, operator: str, epoch: int, changes: Any, combine: Any = None) -> int:
        self.committed |= set(changes)
        return super().commit_entries(operator, epoch, changes, combine)


def _dedupe_rows(keys: list[int], t: int) -> pa.Table:
    return pa.table({KG: pa.array([k % 4 for k in keys], pa.int32()),
                     "k": pa.array(keys, pa.int64()), "t": pa.array([t] * len(keys), pa.int64()),
                     TIME_US: pa.array([t] * len(keys), pa.int64())})


def _join_rows(keys: list[int], t: int, side: int) -> pa.Table:
    return pa.table({KG: pa.array([k % 4 for k in keys], pa.int32()),
                     SIDE: pa.array([side] * len(keys), pa.int8()),
                     "k": pa.array(keys, pa.int64()), "t": pa.array([t] * len(keys), pa.int64()),
                     TIME_US: pa.array([t] * len(keys), pa.int64()),
                     "a": pa.array([f"a{k}" if side == 0 else None for k in keys], pa.string()),
                     "b": pa.array([f"b{k}" if side == 1 else None for k in keys], pa.string())})


def _dedupe(store: Any, epoch: int, rows: pa.Table | None, watermark: int | None = None) -> list:  # type: ignore[type-arg]
    task = keyed_task(DEDUPE, DEDUPE_OUT, epoch, owners=OWNERS, watermark_us=watermark)
    out = process_dedupe_instance(task, InstanceReport(instance=0), rows, store)
    return [] if out is None else sorted(zip(out["k"].to_pylist(), out["t"].to_pylist(),
                                             strict=True))


def _join(store: Any, epoch: int, rows: pa.Table | None, watermark: int | None = None) -> list:  # type: ignore[type-arg]
    task = keyed_task(JOIN, JOIN_OUT, epoch, owners=OWNERS, watermark_us=watermark)
    out = process_join_instance(task, InstanceReport(instance=0), rows, store)
    return [] if out is None else sorted(out.select(["k", "a", "b"]).to_pylist(),
                                         key=lambda r: r["k"])


def test_a_dedupe_epoch_reads_and_writes_only_the_groups_of_its_input() -> None:
    store = CountingStore()
    assert _dedupe(store, 0, _dedupe_rows([0, 1, 2, 3], 100)) == [(k, 100) for k in range(4)]
    assert store.groups("d") == {0, 1, 2, 3}
    store.read.clear()
    store.committed.clear()
    assert _dedupe(store, 1, _dedupe_rows([4, 8, 5], 105)) == [(4, 105), (5, 105), (8, 105)]
    assert store.read == {0, 1} and store.committed == {0, 1}
    assert _dedupe(store, 2, _dedupe_rows([0, 2], 106)) == []  # remembered: within the bound
    assert _dedupe(store, 3, _dedupe_rows([0], 111)) == [(0, 111)]


def test_a_join_epoch_reads_and_writes_only_the_groups_of_its_input() -> None:
    store = CountingStore()
    assert _join(store, 0, _join_rows([0, 1, 2, 3], 100, 0)) == []
    store.read.clear()
    store.committed.clear()
    pairs = _join(store, 1, _join_rows([1, 5], 104, 1))
    assert pairs == [{"k": 1, "a": "a1", "b": "b1"}]
    assert store.read == {1} and store.committed == {1}
    # Group 2's buffered left row still matches a right row that arrives later.
    assert _join(store, 2, _join_rows([2], 108, 1)) == [{"k": 2, "a": "a2", "b": "b2"}]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_replayed_dedupe_and_join_epochs_re_emit_and_apply_once(kind: str, tmp_path: Any) -> None:
    store = open_store(StoreSpec(kind, str(tmp_path), f"replay-{kind}"))
    store.clear()
    first = _dedupe(store, 0, _dedupe_rows([1, 2], 100))
    assert _dedupe(store, 0, _dedupe_rows([1, 2], 100)) == first == [(1, 100), (2, 100)]
    assert _dedupe(store, 1, _dedupe_rows([1], 103)) == []
    _join(store, 0, _join_rows([1], 100, 0))
    first_pairs = _join(store, 1, _join_rows([1], 102, 1))
    assert _join(store, 1, _join_rows([1], 102, 1)) == first_pairs
    assert len(first_pairs) == 1
    # The replay did not buffer the right row twice: one more left row makes one pair.
    assert len(_join(store, 2, _join_rows([1], 103, 0))) == 1


def test_keys_the_watermark_expired_leave_with_the_next_commit_of_their_group() -> None:
    store = MemoryStateStore()
    _dedupe(store, 0, _dedupe_rows([0, 4], 100))
    # Key 4 expires (100 + 10 <= 120); key 0 is remembered again at 120.
    assert _dedupe(store, 1, _dedupe_rows([0], 120), watermark=120) == [(0, 120)]
    left = store.fire_timers("d", [0], 2**62)
    assert left["field"].to_pylist() == ["v0"]
    assert _dedupe(store, 2, _dedupe_rows([4], 121), watermark=120) == [(4, 121)]
