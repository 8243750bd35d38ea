"""Turns picked-up commands into the next epoch's configuration and acknowledgements.

A sample changes no configuration: its ack names the epoch from which on it is served (the
runner adds the rows once an epoch emitted some: ``engine.runtime.driver.samples``).

An ack's ``state_bytes_copied`` is what the state store reports it copied between owners to
install the new owners (``StateStore.hand_over``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from engine.dag import JobGraph
from engine.runtime.control.messages import Ack, Command
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
        assert command.operator is not None
        copied = hand_over(command.operator, owner_moves(config[command.operator],
                                                         after[command.operator]))
        config = after
        acks.append(Ack.of(command, epoch=epoch, before=before,
                           after=describe(config, command.operator), state_bytes_copied=copied))
    return config, acks, any(command.kind == "stop" for command in commands)


def owner_moves(before: OperatorConfig, after: OperatorConfig) -> list[tuple[int, int, int]]:
    """(key group, old owner, new owner) of every key group whose owner changes."""
    if before.owners is None or after.owners is None:
        return []
    return [(kg, old, new) for kg, (old, new) in enumerate(zip(before.owners, after.owners,
                                                                  strict=True)) if old != new]
