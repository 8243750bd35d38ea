"""Turns picked-up commands into the next epoch's configuration and acknowledgements.

Acknowledgement shape (also what ``ReconfigurationRecorder.acknowledge`` receives)::

    {"request_id", "kind", "operator", "status": "applied" | "rejected", "reason",
     "applied_epoch", "requested_at_ms", "picked_up_at_ms", "control_latency_ms",
     "state_bytes_moved", "before": {...}, "after": {...}}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.dag import JobGraph
from engine.runtime.commands import Command
from engine.runtime.errors import CommandRejected
from engine.runtime.run_config import LogicCheck, RunConfig, apply_command, describe


def apply_commands(
    graph: JobGraph,
    config: RunConfig,
    commands: Sequence[Command],
    epoch: int,
    loads: Mapping[str, Sequence[float]],
    check_logic: LogicCheck,
) -> tuple[RunConfig, list[dict[str, Any]], bool]:
    """Applies commands in order; returns the new config, one ack each, and whether a
    stop was requested. A rejected command leaves the config as it was."""
    acks: list[dict[str, Any]] = []
    stop = False
    for command in commands:
        before = describe(config, command.operator)
        if command.kind == "stop":
            stop = True
            acks.append(_ack(command, "applied", epoch, None, before, before))
            continue
        try:
            config = apply_command(graph, config, command, loads, check_logic)
        except CommandRejected as exc:
            acks.append(_ack(command, "rejected", None, str(exc), before, before))
            continue
        acks.append(
            _ack(command, "applied", epoch, None, before, describe(config, command.operator))
        )
    return config, acks, stop


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
        # State is addressed by key group, not by instance: installing a new mapping
        # copies nothing.
        "state_bytes_moved": 0 if status == "applied" else None,
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
        "state_bytes_moved": None,
        "before": {},
        "after": {},
    }
