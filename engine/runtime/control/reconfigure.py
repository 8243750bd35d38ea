"""Turns picked-up commands into the next epoch's configuration and acknowledgements.

A sample changes no configuration: its ack names the epoch from which on it is served (the
runner adds the rows once an epoch emitted some: ``engine.runtime.driver.samples``).

State is addressed by key group, never by owner, so installing new owners copies nothing:
an ack's ``state_bytes_copied`` is 0 because no path to copy state exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.dag import JobGraph
from engine.runtime.control.messages import Ack, Command
from engine.runtime.control.run_config import (
    LogicCheck,
    RunConfig,
    apply_command,
    describe,
)
from engine.runtime.errors import CommandRejected


def apply_commands(
    graph: JobGraph,
    config: RunConfig,
    commands: Sequence[Command],
    epoch: int,
    loads: Mapping[str, Sequence[float]],
    check_logic: LogicCheck,
) -> tuple[RunConfig, list[Ack], bool]:
    """Applies commands in order; returns the new config, one ack each, and whether a
    stop was requested. A rejected command leaves the config as it was."""
    acks: list[Ack] = []
    for command in commands:
        before = describe(config, command.operator)
        if command.kind in ("stop", "sample"):
            unknown = command.kind == "sample" and command.operator not in config
            reason = f"unknown operator {command.operator!r}" if unknown else None
            acks.append(Ack.of(command, epoch=epoch, before=before, after=before, reason=reason))
            continue
        try:
            after = apply_command(graph, config, command, loads, check_logic)
        except CommandRejected as exc:
            acks.append(Ack.of(command, epoch=None, before=before, after=before, reason=str(exc)))
            continue
        config = after
        acks.append(Ack.of(command, epoch=epoch, before=before,
                           after=describe(config, command.operator), state_bytes_copied=0))
    return config, acks, any(command.kind == "stop" for command in commands)
