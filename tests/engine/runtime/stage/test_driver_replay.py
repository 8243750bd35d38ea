"""A replay of a window epoch that closes no window, checked on the driver from the store
(``vsn_stage._replayed_without_job``): reports of the groups holding the epoch, or None
where the instances must replay it (stored rows to re-emit)."""

from __future__ import annotations

import pyarrow as pa

from engine.runtime.operators.window_spec import parse_window_spec
from engine.runtime.stage.vsn_stage import StageEpoch, _replayed_without_job
from engine.runtime.state import KeyedChanges, StoreSpec, open_store

SPEC = parse_window_spec(
    "counts",
    {"key": ["k"], "time": "t", "window": "10 seconds", "watermark": "0 seconds",
     "aggregates": {"n": "count(*)"}},
)
OWNERS = (0, 1, 2, 0, 1, 2, 0, 1)  # 8 key groups over 3 new instances


def _at(store: StoreSpec, epoch: int) -> StageEpoch:
    return StageEpoch(epoch, len(OWNERS), OWNERS, 3, None, store, closes=False, replay=True)


def _puts(field: str) -> pa.Table:
    return pa.table({"timer": pa.array([10], pa.int64()), "field": [field], "value": ["1"]})


def test_reports_name_the_groups_that_hold_the_epoch(tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = StoreSpec("sqlite", str(tmp_path), "replay")
    store = open_store(spec)
    store.commit_entries("counts", 4, {kg: KeyedChanges(puts=_puts(f"k{kg}")) for kg in range(8)})
    # Groups 1 and 6 had no input in epoch 5: their marks stay at 4.
    store.commit_entries("counts", 5, {kg: KeyedChanges(puts=_puts(f"j{kg}"))
                                       for kg in (0, 2, 3, 4, 5, 7)})
    reports = _replayed_without_job(SPEC, _at(spec, 5))
    assert reports is not None
    assert [r["instance"] for r in reports] == [0, 1, 2]
    assert [r["groups_replayed"] for r in reports] == [2, 2, 2]  # {0, 3}, {4, 7}, {2, 5}
    assert all(r["rows_in"] == r["rows_out"] == r["groups_written"] == 0 for r in reports)


def test_stored_rows_leave_the_replay_to_the_instances(tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = StoreSpec("sqlite", str(tmp_path), "replay")
    store = open_store(spec)
    emitted = pa.table({"k": [3], "n": [1]})
    store.commit_entries("counts", 5, {3: KeyedChanges(puts=_puts("k3"), emitted=emitted)})
    assert _replayed_without_job(SPEC, _at(spec, 5)) is None
