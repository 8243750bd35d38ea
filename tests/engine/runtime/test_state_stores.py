"""The state stores: atomic per key group, carrying the epoch, skipping replays."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from engine.runtime.state import StoreSpec, open_store
from engine.runtime.state.base import EMITTED
from tests.engine.runtime.conftest import REDIS_URL


@pytest.fixture(params=["sqlite", "files", "redis", "memory"])
def store(request, tmp_path):  # type: ignore[no-untyped-def]
    location = {"sqlite": str(tmp_path), "files": str(tmp_path), "redis": REDIS_URL,
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
