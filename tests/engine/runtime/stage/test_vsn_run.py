"""End-to-end runs on local[2]: exact results, live rescale and rebalance, logic changes
and rejected commands, all against results computed from the generator's definition."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from engine.runtime.api import request_reconfiguration
from engine.runtime.io.sinks import clear_memory_sink, memory_sink_rows
from tests.engine.runtime.jobs import (
    actual_windows,
    expected_windows,
    start_collected_run,
    wait_epoch,
    window_job,
)

pytestmark = pytest.mark.spark


def _memory_job(**kwargs: Any) -> tuple[dict[str, Any], str]:
    name = f"sink_{uuid.uuid4().hex[:8]}"
    return window_job({"type": "sink.memory", "params": {"name": name}}, **kwargs), name


def test_rescales_and_rebalances_leave_results_exact(spark, tmp_path) -> None:
    job, sink = _memory_job(parallelism=2)
    run, publisher, recorder = start_collected_run(spark, tmp_path, job, last_epoch=14)
    channel = run.channel
    wait_epoch(run, 2)
    up = request_reconfiguration(channel, kind="rescale", operator="counts", parallelism=8)
    assert recorder.wait_for(up, 60).status == "applied"
    wait_epoch(run, 6)
    weighted = request_reconfiguration(
        channel, kind="rebalance", operator="counts", assignment="weighted"
    )
    assert recorder.wait_for(weighted, 60).status == "applied"
    wait_epoch(run, 8)
    down = request_reconfiguration(channel, kind="rescale", operator="counts", parallelism=3)
    explicit = request_reconfiguration(
        channel, kind="rebalance", operator="counts", assignment=[0] * 10 + [1] * 12 + [2] * 10
    )
    assert run.wait(180) == "stopped"

    acks = {a.request_id: a for a in recorder.acks}
    assert all(acks[r].status == "applied" for r in (up, weighted, down, explicit))
    assert all(acks[r].state_bytes_copied == 0 for r in acks)
    by_epoch = {m["epoch"]: m["operators"]["counts"]["instances"] for m in publisher.epochs}
    assert by_epoch[acks[up].applied_epoch] == 8
    assert by_epoch[acks[down].applied_epoch] == 3
    assert by_epoch[0] == 2
    expected = expected_windows(spark, run.start_ms, 14, [(0, "event_type = 'view'")])
    assert expected and actual_windows(memory_sink_rows(sink)) == expected
    clear_memory_sink(sink)


def test_bad_commands_are_rejected_and_the_run_goes_on(spark, tmp_path) -> None:
    job, sink = _memory_job(parallelism=2)
    run, publisher, recorder = start_collected_run(spark, tmp_path, job, last_epoch=7)
    channel = run.channel
    wait_epoch(run, 1)
    bad = {
        "zero": dict(kind="rescale", operator="counts", parallelism=0),
        "too_many": dict(kind="rescale", operator="counts", parallelism=33),
        "unknown": dict(kind="rescale", operator="nope", parallelism=2),
        "sink": dict(kind="rescale", operator="out", parallelism=2),
        "bad_expr": dict(kind="logic", operator="views", params={"condition": "no_such_col > 1"}),
        "stateful": dict(
            kind="logic",
            operator="counts",
            params={**job["operators"][2]["params"], "key": ["user_id"]},
        ),
        "bad_owner": dict(kind="rebalance", operator="counts", assignment=[0, 1]),
    }
    ids = {name: request_reconfiguration(channel, **cmd) for name, cmd in bad.items()}
    channel.send({"request_id": "malformed-1", "kind": "explode"})
    channel.send(
        {
            "request_id": "malformed-2",
            "kind": "rescale",
            "operator": "counts",
            "parallelism": "many",
        }
    )
    assert run.wait(180) == "stopped"

    acks = {a.request_id: a for a in recorder.acks}
    for name, request in ids.items():
        assert acks[request].status == "rejected", name
        assert acks[request].reason, name
    assert "1..32" in acks[ids["too_many"]].reason
    assert "unknown operator" in acks[ids["unknown"]].reason
    assert "refused" in acks[ids["stateful"]].reason
    assert "writes in the stage that feeds it" in acks[ids["sink"]].reason
    for request in ("malformed-1", "malformed-2"):
        assert recorder.wait_for(request, 5).status == "rejected"
    assert run.last_epoch == 7
    expected = expected_windows(spark, run.start_ms, 7, [(0, "event_type = 'view'")])
    assert actual_windows(memory_sink_rows(sink)) == expected
    clear_memory_sink(sink)


def test_logic_change_takes_effect_at_an_epoch_boundary(spark, tmp_path) -> None:
    job, sink = _memory_job(parallelism=3)
    run, publisher, recorder = start_collected_run(spark, tmp_path, job, last_epoch=9)
    wait_epoch(run, 2)
    change = request_reconfiguration(
        run.channel,
        kind="logic",
        operator="views",
        params={"condition": "event_type <> 'purchase'"},
    )
    assert run.wait(180) == "stopped"
    ack = next(a for a in recorder.acks if a.request_id == change)
    assert ack.status == "applied"
    applied = ack.applied_epoch
    assert 3 <= applied <= 9
    expected = expected_windows(
        spark,
        run.start_ms,
        9,
        [
            (0, "event_type = 'view'"),
            (applied, "event_type <> 'purchase'"),
        ],
    )
    assert actual_windows(memory_sink_rows(sink)) == expected
    metrics = publisher.epochs[-1]
    assert set(metrics["operators"]) == {"events", "views", "counts", "out"}
    assert metrics["operators"]["counts"]["instances"] == 3
    assert len(metrics["operators"]["counts"]["busy_ms"]) == 3
    clear_memory_sink(sink)


def test_sliding_windows_match_spark_through_a_rescale(spark, tmp_path) -> None:
    # A 4 s window sliding by 3 s: some rows fall in one window, some in two.
    job, sink = _memory_job(parallelism=2, slide_s=3)
    run, _, recorder = start_collected_run(spark, tmp_path, job, last_epoch=9)
    wait_epoch(run, 3)
    up = request_reconfiguration(run.channel, kind="rescale", operator="counts", parallelism=5)
    assert run.wait(180) == "stopped"
    assert next(a for a in recorder.acks if a.request_id == up).status == "applied"
    expected = expected_windows(spark, run.start_ms, 9, [(0, "event_type = 'view'")], slide_s=3)
    assert expected and actual_windows(memory_sink_rows(sink)) == expected
    clear_memory_sink(sink)
