"""Reconfiguration commands: the message format of the control channel and its parsing.

A message is a flat mapping of strings (a Redis stream entry):
``request_id``, ``kind`` (rescale | rebalance | logic), ``operator``, ``requested_at``
(epoch ms) and, by kind, ``parallelism`` (int), ``assignment`` (JSON list of owners per
key group, or ``"weighted"`` for a load-weighted assignment) or ``params`` (JSON object).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.runtime.errors import CommandRejected

KINDS = ("rescale", "rebalance", "logic", "stop")
WORKLOAD_KINDS = frozenset({"rescale", "rebalance"})
"""Commands that change only who owns which key groups: an epoch may take them mid-way."""


@dataclass(frozen=True)
class Command:
    """A parsed reconfiguration request, with when it was requested and picked up."""

    request_id: str
    kind: str
    operator: str | None
    requested_at_ms: float
    picked_up_at_ms: float
    cursor: str
    parallelism: int | None = None
    assignment: tuple[int, ...] | str | None = None
    params: dict[str, Any] | None = field(default=None, hash=False)

    @property
    def control_latency_ms(self) -> float:
        """Request to pick-up, in milliseconds."""
        return max(0.0, self.picked_up_at_ms - self.requested_at_ms)


def _text(fields: Mapping[Any, Any], name: str) -> str | None:
    value = fields.get(name)
    if value is None:
        value = fields.get(name.encode()) if isinstance(next(iter(fields), ""), bytes) else None
    if isinstance(value, bytes):
        value = value.decode()
    return None if value is None else str(value)


def parse_command(fields: Mapping[Any, Any], cursor: str, picked_up_at_ms: float) -> Command:
    """A Command from a raw message; CommandRejected names what is malformed."""
    request_id = _text(fields, "request_id") or f"anonymous-{cursor}"
    kind = _text(fields, "kind")
    if kind not in KINDS:
        raise CommandRejected(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    operator = _text(fields, "operator")
    if kind != "stop" and not operator:
        raise CommandRejected("operator is required")
    requested_at = _number(_text(fields, "requested_at"), "requested_at", picked_up_at_ms)
    command = Command(request_id, kind, operator, requested_at, picked_up_at_ms, cursor)
    if kind == "rescale":
        return _with(command, parallelism=_parallelism(_text(fields, "parallelism")))
    if kind == "rebalance":
        return _with(command, assignment=_assignment(_text(fields, "assignment")))
    if kind == "logic":
        return _with(command, params=_params(_text(fields, "params")))
    return command


def _with(command: Command, **changes: Any) -> Command:
    from dataclasses import replace

    return replace(command, **changes)


def _number(text: str | None, name: str, default: float) -> float:
    if text is None or text == "":
        return default
    try:
        return float(text)
    except ValueError as exc:
        raise CommandRejected(f"{name} must be a number of epoch milliseconds") from exc


def _parallelism(text: str | None) -> int:
    try:
        return int(str(text))
    except ValueError as exc:
        raise CommandRejected(f"parallelism must be an integer, got {text!r}") from exc


def _assignment(text: str | None) -> tuple[int, ...] | str:
    if text in (None, "", "weighted"):
        return "weighted"
    try:
        owners = json.loads(str(text))
    except json.JSONDecodeError as exc:
        raise CommandRejected("assignment must be a JSON list of owners or 'weighted'") from exc
    if not isinstance(owners, list) or not all(isinstance(o, int) for o in owners):
        raise CommandRejected("assignment must be a JSON list of integers (owner per key group)")
    return tuple(owners)


def _params(text: str | None) -> dict[str, Any]:
    try:
        params = json.loads(str(text))
    except json.JSONDecodeError as exc:
        raise CommandRejected("params must be a JSON object") from exc
    if not isinstance(params, dict):
        raise CommandRejected("params must be a JSON object")
    return params


def command_message(
    kind: str,
    operator: str | None,
    request_id: str,
    requested_at_ms: float,
    parallelism: int | None = None,
    assignment: list[int] | str | None = None,
    params: dict[str, Any] | None = None,
) -> dict[str, str]:
    """The wire form of a command, as a client sends it."""
    message = {"request_id": request_id, "kind": kind, "requested_at": f"{requested_at_ms:.3f}"}
    if operator is not None:
        message["operator"] = operator
    if parallelism is not None:
        message["parallelism"] = str(parallelism)
    if assignment is not None:
        message["assignment"] = (
            assignment if isinstance(assignment, str) else json.dumps(assignment)
        )
    if params is not None:
        message["params"] = json.dumps(params)
    return message
