"""A stopped run's kept state: measured by its store, embedded or Redis, and discarded with
its checkpoint so that nothing is left to resume from."""

from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pytest

from engine.runtime.driver.kept_state import discard_state, kept_state, run_store
from engine.runtime.state import KeyedChanges, build_store


@pytest.fixture(params=["embedded", "redis"])
def state_url(request, redis_url):  # type: ignore[no-untyped-def]
    return None if request.param == "embedded" else redis_url


def test_kept_state_is_measured_then_discarded_with_the_checkpoint(tmp_path, state_url) -> None:  # type: ignore[no-untyped-def]
    checkpoint, run_id = tmp_path / "checkpoint", uuid.uuid4().hex[:8]
    where = {"run_id": run_id, "state_url": state_url, "prefix": "kstest:"}
    assert kept_state(str(checkpoint), **where) is None  # a run that never started
    checkpoint.mkdir()
    (checkpoint / "run.json").write_text(json.dumps({"run_id": run_id, "start_ms": 0}))
    store = build_store(run_store(str(checkpoint), run_id, state_url, "kstest:"))
    puts = pa.table({"timer": pa.array([5, 5], pa.int64()), "field": ["a", "b"],
                     "value": ["1", "2"]})
    store.commit_entries("counts", 1, {7: KeyedChanges(puts=puts)})

    kept = kept_state(str(checkpoint), **where)
    assert kept is not None and (kept.entries, kept.key_groups) == (2, 1) and kept.bytes > 0
    discard_state(str(checkpoint), **where)
    assert not checkpoint.exists() and not (tmp_path / "checkpoint.discarded").exists()
    assert kept_state(str(checkpoint), **where) is None
    assert build_store(run_store(str(checkpoint), run_id, state_url, "kstest:")).size().entries == 0
