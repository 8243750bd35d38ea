"""An epoch whose watermark passes no window's end runs its window aggregate without a
cache (``vsn_stage._reports_of``): the planner's ``closes`` must be right on a real run,
and the results must stay exact even if it were wrong."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import engine.runtime.driver.planning as planning
from engine.runtime.control.epoch_plan import EpochPlan
from engine.runtime.driver.epoch_log import EpochLog
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_rows
from tests.engine.runtime.jobs import (
    actual_windows,
    expected_windows,
    start_collected_run,
    window_job,
)

pytestmark = pytest.mark.spark

LAST_EPOCH = 9


def _run(spark: Any, tmp_path: Any, monkeypatch: Any, slide_s: int | None) -> tuple[
        dict[int, EpochPlan], dict[int, int], dict, dict]:
    """A window job run to ``LAST_EPOCH``: each epoch's logged plan, the rows the window
    operator emitted in each epoch, the windows the sink got and those expected."""
    plans: dict[int, EpochPlan] = {}
    write_plan = EpochLog.write_plan

    def recorded(log: EpochLog, plan: EpochPlan) -> None:
        plans[plan.epoch] = plan
        write_plan(log, plan)
        assert log.plan(plan.epoch) == plan  # a real run's plan reads back equal

    monkeypatch.setattr(EpochLog, "write_plan", recorded)
    name = f"sink_{uuid.uuid4().hex[:8]}"
    job = window_job({"type": "sink.memory", "params": {"name": name}}, slide_s=slide_s)
    run, publisher, _ = start_collected_run(spark, tmp_path, job, last_epoch=LAST_EPOCH)
    assert run.wait(180) == "stopped"
    run.flush()
    emitted = {m["epoch"]: m["operators"]["counts"]["rows_out"] for m in publisher.epochs}
    expected = expected_windows(spark, run.start_ms, LAST_EPOCH, [(0, "event_type = 'view'")],
                                slide_s=slide_s)
    actual = actual_windows(memory_sink_rows(name))
    clear_memory_sink(name)
    return plans, emitted, actual, expected


@pytest.mark.parametrize("slide_s", [None, 3])
def test_only_epochs_whose_watermark_passes_a_window_end_emit(
    spark, tmp_path, monkeypatch, slide_s
) -> None:
    plans, emitted, actual, expected = _run(spark, tmp_path, monkeypatch, slide_s)
    closes = {epoch: plan.closes["counts"] for epoch, plan in plans.items()}
    assert set(emitted) == set(closes)
    quiet = [epoch for epoch, closing in closes.items() if not closing]
    # Most epochs of 4 s windows close none (a slide of 3 s closes one every 3 s).
    assert len(quiet) >= 4, closes
    assert all(emitted[epoch] == 0 for epoch in quiet), (closes, emitted)
    assert sum(emitted[epoch] for epoch in closes if closes[epoch]) > 0
    assert expected and actual == expected


def test_rows_emitted_in_an_epoch_planned_to_close_none_still_reach_the_sink(
    spark, tmp_path, monkeypatch
) -> None:
    # Every epoch planned as if it closed no window: the windows each one closes are
    # emitted all the same, through the collected output.
    monkeypatch.setattr(planning, "windows_closing",
                        lambda graph, *_: {"counts": False})
    plans, emitted, actual, expected = _run(spark, tmp_path, monkeypatch, None)
    assert not any(plan.closes["counts"] for plan in plans.values())
    assert sum(emitted.values()) > 0
    assert expected and actual == expected
