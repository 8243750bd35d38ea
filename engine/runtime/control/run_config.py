"""The live configuration of a run (parallelism, assignment and params per operator) and
how a reconfiguration command changes it.

Rescales and rebalances only install a new key-group -> instance mapping: with state
addressed by key group, nothing is copied.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.dag import CLOCK_SOURCES, JobGraph, fixed_parallelism_reason, state_kind_of
from engine.dag.catalog import OPERATOR_TYPES
from engine.errors import MappingError
from engine.mapping import Assignment, balanced_assignment, weighted_assignment
from engine.planner import PhysicalPlan, plan_job
from engine.runtime.control.messages import Command
from engine.runtime.errors import CommandRejected


@dataclass(frozen=True)
class OperatorConfig:
    """One operator's current parallelism, key-group owners (keyed only) and params."""

    parallelism: int
    owners: tuple[int, ...] | None
    params: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the epoch log and acks; ``epoch_plan`` reads it back)."""
        owners = None if self.owners is None else list(self.owners)
        return {"parallelism": self.parallelism, "owners": owners, "params": self.params}


RunConfig = dict[str, OperatorConfig]
LogicCheck = Callable[[str, dict[str, Any]], None]
"""Raises CommandRejected if new params for an operator are invalid or unsafe."""


def initial_config(plan: PhysicalPlan) -> RunConfig:
    """Every operator as the planner placed it: its region's instance count and, for a keyed
    operator, the plan's key-group owners (one instance owns all of a global operator's)."""
    graph = plan.graph
    config: RunConfig = {}
    for op in graph.operators:
        parallelism = plan.region_of(op.id).parallelism
        owners = None
        if op.id in plan.assignments:
            owners = plan.assignments[op.id].owners
        elif state_kind_of(op) in ("keyed", "global"):
            owners = balanced_assignment(graph.key_groups, parallelism).owners
        config[op.id] = OperatorConfig(parallelism, owners, dict(op.params))
    return config


def running_plan(graph: JobGraph, config: RunConfig) -> PhysicalPlan:
    """The planner's plan of ``graph`` as it runs under ``config``: each operator at its
    running parallelism and params, keyed operators with their current owners. The epoch
    executes its regions (how rows are split and merged)."""
    running = graph
    for op_id, current in config.items():
        op = graph.operator(op_id)
        if current.parallelism != op.parallelism:
            running = running.with_parallelism(op_id, current.parallelism)
        if current.params != dict(op.params):
            running = running.with_params(op_id, current.params)
    assignments = {
        op_id: Assignment(graph.key_groups, current.owners, current.parallelism)
        for op_id, current in config.items()
        if current.owners is not None and state_kind_of(graph.operator(op_id)) == "keyed"
    }
    return plan_job(running, assignments)


def apply_command(
    graph: JobGraph,
    config: RunConfig,
    command: Command,
    loads: Mapping[str, Sequence[float]],
    check_logic: LogicCheck,
) -> RunConfig:
    """The config after ``command``; CommandRejected with the reason if it is invalid."""
    if command.operator is None or command.operator not in config:
        raise CommandRejected(f"unknown operator {command.operator!r}")
    op = graph.operator(command.operator)
    current = config[op.id]
    if command.kind == "logic":
        assert command.params is not None
        params = dict(command.params)
        check_logic(op.id, params)
        return {**config, op.id: replace(current, params=params)}
    role = OPERATOR_TYPES[op.type].role if op.type in OPERATOR_TYPES else "operator"
    if role != "operator" and not (command.kind == "rescale" and op.type in CLOCK_SOURCES):
        raise CommandRejected(f"{op.id!r} is a {role}: {fixed_parallelism_reason(op.type)}")
    if command.kind == "rescale":
        return {**config, op.id: _rescaled(graph, op.id, current, command.parallelism)}
    return {**config, op.id: _rebalanced(graph, op.id, current, command, loads.get(op.id))}


def _rescaled(
    graph: JobGraph, op_id: str, current: OperatorConfig, parallelism: int | None
) -> OperatorConfig:
    if parallelism is None or not 1 <= parallelism <= graph.key_groups:
        raise CommandRejected(
            f"parallelism must be in 1..{graph.key_groups} (key_groups), got {parallelism}"
        )
    kind = state_kind_of(graph.operator(op_id))
    if kind == "global" and parallelism != 1:
        raise CommandRejected(f"{op_id!r} has global state: it must run as one instance")
    if current.owners is None:
        return replace(current, parallelism=parallelism)
    owners = balanced_assignment(graph.key_groups, parallelism).owners
    return replace(current, parallelism=parallelism, owners=owners)


def _rebalanced(
    graph: JobGraph,
    op_id: str,
    current: OperatorConfig,
    command: Command,
    loads: Sequence[float] | None,
) -> OperatorConfig:
    if current.owners is None:
        raise CommandRejected(f"{op_id!r} is stateless: it has no key groups to rebalance")
    if command.assignment == "weighted":
        observed = list(loads or [])
        if len(observed) != graph.key_groups:
            observed = [0.0] * graph.key_groups
        return replace(current, owners=weighted_assignment(observed, current.parallelism).owners)
    assert isinstance(command.assignment, tuple)
    try:
        parallelism = max(command.assignment) + 1 if command.assignment else 0
        assignment = Assignment(graph.key_groups, command.assignment, parallelism)
    except (MappingError, ValueError) as exc:
        raise CommandRejected(f"invalid assignment: {exc}") from exc
    if len(set(assignment.owners)) != assignment.parallelism:
        raise CommandRejected("invalid assignment: every instance 0..max must own a key group")
    return replace(current, owners=assignment.owners, parallelism=assignment.parallelism)


def describe(config: RunConfig, op_id: str | None) -> dict[str, Any]:
    """The part of the config an ack shows as before/after (one operator)."""
    if op_id is None or op_id not in config:
        return {}
    doc = config[op_id].to_dict()
    if doc["owners"] is not None:
        doc["ranges"] = _ranges(doc.pop("owners"))
    return doc


def _ranges(owners: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for kg, owner in enumerate(owners):
        if runs and runs[-1][2] == owner and runs[-1][1] == kg - 1:
            runs[-1][1] = kg
        else:
            runs.append([kg, kg, owner])
    return runs
