"""Parsing and validating reconfiguration commands (no Spark)."""

from __future__ import annotations

import pytest

from engine.dag import parse_job_graph
from engine.runtime.commands import command_message, parse_command
from engine.runtime.errors import CommandRejected
from engine.runtime.reconfigure import apply_commands
from engine.runtime.run_config import initial_config
from tests.engine.runtime.jobs import window_job

GRAPH = parse_job_graph(window_job({"type": "sink.memory", "params": {}}, key_groups=16))


def _command(**fields: object):  # type: ignore[no-untyped-def]
    message = command_message(request_id="r1", requested_at_ms=1000.0, **fields)  # type: ignore[arg-type]
    return parse_command(message, "1-0", 1012.5)


def _apply(**fields: object) -> tuple[dict, dict]:
    config, acks, _ = apply_commands(
        GRAPH,
        initial_config(GRAPH),
        [_command(**fields)],
        7,
        {"counts": [1.0] * 16},
        lambda op, params: None,
    )
    return config, acks[0]


def test_rescale_installs_a_balanced_assignment_with_nothing_moved() -> None:
    config, ack = _apply(kind="rescale", operator="counts", parallelism=5)
    assert ack["status"] == "applied" and ack["applied_epoch"] == 7
    assert ack["control_latency_ms"] == 12.5 and ack["state_bytes_moved"] == 0
    assert config["counts"].parallelism == 5
    assert config["counts"].owners == tuple(kg * 5 // 16 for kg in range(16))
    assert ack["before"]["parallelism"] == 2 and ack["after"]["parallelism"] == 5


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"kind": "rescale", "operator": "counts", "parallelism": 0}, "1..16"),
        ({"kind": "rescale", "operator": "counts", "parallelism": 17}, "1..16"),
        ({"kind": "rescale", "operator": "ghost", "parallelism": 2}, "unknown operator"),
        ({"kind": "rescale", "operator": "out", "parallelism": 2}, "sink"),
        ({"kind": "rebalance", "operator": "views", "assignment": "weighted"}, "stateless"),
        ({"kind": "rebalance", "operator": "counts", "assignment": [0, 1]}, "invalid assignment"),
    ],
)
def test_invalid_commands_are_rejected_with_a_reason(fields: dict, reason: str) -> None:
    config, ack = _apply(**fields)
    assert ack["status"] == "rejected" and reason in ack["reason"]
    assert config == initial_config(GRAPH)


def test_weighted_rebalance_follows_observed_key_group_loads() -> None:
    loads = {"counts": [10.0] * 4 + [1.0] * 12}
    command = _command(kind="rebalance", operator="counts", assignment="weighted")
    config, acks, _ = apply_commands(
        GRAPH, initial_config(GRAPH), [command], 3, loads, lambda op, params: None
    )
    assert acks[0]["status"] == "applied"
    assert config["counts"].owners[:4] == (0, 0, 0, 1)  # the hot groups are split


@pytest.mark.parametrize(
    "message",
    [
        {"kind": "explode", "operator": "counts"},
        {"kind": "rescale"},
        {"kind": "rescale", "operator": "counts", "parallelism": "lots"},
        {"kind": "logic", "operator": "views", "params": "{not json"},
        {"kind": "rebalance", "operator": "counts", "assignment": '[1, "x"]'},
        {"kind": "rescale", "operator": "counts", "parallelism": "2", "requested_at": "noon"},
    ],
)
def test_malformed_messages_are_refused(message: dict) -> None:
    with pytest.raises(CommandRejected):
        parse_command(message, "3-0", 0.0)
