"""A stopped run started again on a new version of its job, from its checkpoint and state:
the new version's params take effect from the first epoch after the stop, and windows open at
the stop close with rows of both versions, each counted once."""

from __future__ import annotations

import copy
import uuid

import pytest

from engine.runtime.api import start_run
from engine.runtime.driver.metrics import CollectingPublisher
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_rows
from tests.engine.runtime.jobs import (
    actual_windows,
    expected_windows,
    start_collected_run,
    window_job,
)

pytestmark = pytest.mark.spark

EVEN_USERS = "event_type = 'view' AND user_id % 2 = 0"


def test_a_new_version_continues_from_the_stopped_runs_state(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sink = f"sink_{uuid.uuid4().hex[:8]}"
    first = window_job({"type": "sink.memory", "params": {"name": sink}})
    run, _, _ = start_collected_run(spark, tmp_path, first, last_epoch=5)
    assert run.wait(180) == "stopped"

    upgraded = copy.deepcopy(first)
    views = next(op for op in upgraded["operators"] if op["id"] == "views")
    views["params"]["condition"] = EVEN_USERS
    again = start_run(upgraded, checkpoint=str(tmp_path / "ckpt"), publisher=CollectingPublisher(),
                      spark=spark, epoch_ms=1000, trigger_ms=0, stop_after_epoch=11)
    assert again.wait(180) == "stopped", again.error

    expected = expected_windows(spark, again.start_ms, 11,
                                [(0, "event_type = 'view'"), (6, EVEN_USERS)])
    assert actual_windows(memory_sink_rows(sink)) == expected
    clear_memory_sink(sink)
