"""Turns picked-up commands into the next epoch's configuration and acknowledgements.

Acknowledgement shape (also what ``ReconfigurationRecorder.acknowledge`` receives)::

    {"request_id", "kind", "operator", "status": "applied" | "rejected", "reason",
     "applied_epoch", "requested_at_ms", "picked_up_at_ms", "control_latency_ms",
     "state_bytes_copied", "before": {...}, "after": {...},
     "epoch_ended_at_ms"}

``state_bytes_copied`` is what the state store reports it copied between owners to install
the new owners (``StateStore.hand_over``); ``epoch_ended_at_ms`` (applied commands) is when
the first epoch run with the change committed, stamped once that epoch ended.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.dag import JobGraph
from engine.runtime.control.commands import Command
from engine.runtime.control.run_config import (
    LogicCheck,
    OperatorConfig,
    RunConfig,
    apply_command,
    describe,
)
from engine.runtime.errors import CommandRejected

HandOver = Callable[[str, Sequence[tuple[int, int, int]]], int]
"""Installs new owners of an operator's key groups, (key group, old, new) each; returns the
state bytes the store copied to do it."""


def apply_commands(
    graph: JobGraph,
    config: RunConfig,
    commands: Sequence[Command],
    epoch: int,
    loads: Mapping[str, Sequence[float]],
    check_logic: LogicCheck,
    hand_over: HandOver,
) -> tuple[RunConfig, list[dict[str, Any]], bool]:
    """Applies commands in order; returns the new config, one ack each, and whether a
    stop was requested. A rejected command leaves the config as it was."""
    acks: list[dict[str, Any]] = []
    stop = False
    for command in commands:
        before = describe(config, command.operator)
        if command.kind == "stop":
            stop = True
            acks.append(stop_ack(command, config, epoch))
            continue
        try:
            after = apply_command(graph, config, command, loads, check_logic)
        except CommandRejected as exc:
            acks.append(_ack(command, "rejected", None, str(exc), before, before))
            continue
        assert command.operator is not None
        copied = hand_over(command.operator, owner_moves(config[command.operator],
                                                         after[command.operator]))
        config = after
        ack = _ack(command, "applied", epoch, None, before, describe(config, command.operator))
        acks.append({**ack, "state_bytes_copied": copied})
    return config, acks, stop


def owner_moves(before: OperatorConfig, after: OperatorConfig) -> list[tuple[int, int, int]]:
    """(key group, old owner, new owner) of every key group whose owner changes."""
    if before.owners is None or after.owners is None:
        return []
    return [(kg, old, new) for kg, (old, new) in enumerate(zip(before.owners, after.owners,
                                                                  strict=True)) if old != new]


def stop_ack(command: Command, config: RunConfig, epoch: int | None) -> dict[str, Any]:
    """A stop's ack: applied after ``epoch`` (None: before any epoch), the plan unchanged."""
    before = describe(config, command.operator)
    return _ack(command, "applied", epoch, None, before, before)


def _ack(
    command: Command,
    status: str,
    epoch: int | None,
    reason: str | None,
    before: dict[str, Any],
    after: dict[str, Any],
) -> dict[str, Any]:
    return {
        "request_id": command.request_id,
        "kind": command.kind,
        "operator": command.operator,
        "status": status,
        "reason": reason,
        "applied_epoch": epoch,
        "requested_at_ms": command.requested_at_ms,
        "picked_up_at_ms": command.picked_up_at_ms,
        "control_latency_ms": round(command.control_latency_ms, 3),
        "state_bytes_copied": None,
        "before": before,
        "after": after,
    }


def malformed_ack(
    cursor: str, fields: Mapping[str, str], reason: str, picked_up_ms: float
) -> dict[str, Any]:
    """The ack of a message that could not be parsed at all."""
    request_id = fields.get("request_id") or f"anonymous-{cursor}"
    return {
        "request_id": request_id,
        "kind": fields.get("kind"),
        "operator": fields.get("operator"),
        "status": "rejected",
        "reason": reason,
        "applied_epoch": None,
        "requested_at_ms": None,
        "picked_up_at_ms": picked_up_ms,
        "control_latency_ms": None,
        "state_bytes_copied": None,
        "before": {},
        "after": {},
    }
