"""Applying reconfiguration commands at an epoch boundary, and their acks (no Spark)."""

from __future__ import annotations

import pytest

from engine.dag import parse_job_graph
from engine.planner import plan_job
from engine.runtime.control.messages import Ack, Command, CommandRequest
from engine.runtime.control.reconfigure import apply_commands
from engine.runtime.control.run_config import initial_config
from tests.engine.runtime.jobs import window_job

GRAPH = parse_job_graph(window_job({"type": "sink.memory", "params": {}}, key_groups=16))


def _command(**fields: object) -> Command:
    request = CommandRequest(request_id="r1", requested_at_ms=1000.0, **fields)  # type: ignore[arg-type]
    return Command.picked_up(request.to_message(), "1-0", 1012.5)


def _apply(**fields: object) -> tuple[dict, Ack]:
    config, acks, _ = apply_commands(
        GRAPH,
        initial_config(plan_job(GRAPH)),
        [_command(**fields)],
        7,
        {"counts": [1.0] * 16},
        lambda op, params: None,
    )
    return config, acks[0]


def test_rescale_installs_a_balanced_assignment_with_nothing_copied() -> None:
    config, ack = _apply(kind="rescale", operator="counts", parallelism=5)
    assert ack.status == "applied" and ack.applied_epoch == 7
    assert ack.control_latency_ms == 12.5 and ack.state_bytes_copied == 0
    assert config["counts"].parallelism == 5
    assert config["counts"].owners == tuple(kg * 5 // 16 for kg in range(16))
    assert ack.before["parallelism"] == 2 and ack.after["parallelism"] == 5


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"kind": "rescale", "operator": "counts", "parallelism": 0}, "1..16"),
        ({"kind": "rescale", "operator": "counts", "parallelism": 17}, "1..16"),
        ({"kind": "rescale", "operator": "ghost", "parallelism": 2}, "unknown operator"),
        ({"kind": "rescale", "operator": "out", "parallelism": 2}, "sink"),
        ({"kind": "rebalance", "operator": "views", "assignment": "weighted"}, "stateless"),
        ({"kind": "rebalance", "operator": "counts", "assignment": (0, 1)}, "invalid assignment"),
    ],
)
def test_invalid_commands_are_rejected_with_a_reason(fields: dict, reason: str) -> None:
    config, ack = _apply(**fields)
    assert ack.status == "rejected" and reason in ack.reason
    assert config == initial_config(plan_job(GRAPH))


def test_weighted_rebalance_follows_observed_key_group_loads() -> None:
    loads = {"counts": [10.0] * 4 + [1.0] * 12}
    command = _command(kind="rebalance", operator="counts", assignment="weighted")
    config, acks, _ = apply_commands(
        GRAPH, initial_config(plan_job(GRAPH)), [command], 3, loads, lambda op, params: None,
    )
    assert acks[0].status == "applied"
    assert config["counts"].owners[:4] == (0, 0, 0, 1)  # the hot groups are split


def test_a_sample_changes_nothing_and_names_the_epoch_it_is_served_from() -> None:
    config, ack = _apply(kind="sample", operator="views")
    assert ack.status == "applied" and ack.applied_epoch == 7 and ack.sample is None
    assert config == initial_config(plan_job(GRAPH))
    _, unknown = _apply(kind="sample", operator="ghost")
    assert unknown.status == "rejected" and unknown.reason == "unknown operator 'ghost'"
