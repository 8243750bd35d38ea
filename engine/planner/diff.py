"""Plan diffs: what changes between two physical plans, by kind of change.

Following the task-centric view of reconfiguration, a change is *workload* (the
key-group mapping of keyed operators), *resources* (instances of an operator) or
*logic* (operator types, params or the graph's wiring).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from engine.mapping.diff import Move, assignment_diff
from engine.planner.plan import PhysicalPlan

ChangeKind = Literal["workload", "resources", "logic"]
KINDS: tuple[ChangeKind, ...] = ("workload", "resources", "logic")


@dataclass(frozen=True)
class PlanChange:
    """One change: its kind, the operators it touches and a one-line description."""

    kind: ChangeKind
    operators: tuple[str, ...]
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"kind": self.kind, "operators": list(self.operators), "detail": self.detail}


@dataclass(frozen=True)
class PlanDiff:
    """Every change between two plans; empty when they run the same way."""

    changes: tuple[PlanChange, ...]

    @property
    def kinds(self) -> tuple[ChangeKind, ...]:
        """Kinds present, in the order workload, resources, logic."""
        present = {c.kind for c in self.changes}
        return tuple(k for k in KINDS if k in present)

    @property
    def affected_operators(self) -> tuple[str, ...]:
        """Operators touched by any change, sorted."""
        return tuple(sorted({op for c in self.changes for op in c.operators}))

    def is_empty(self) -> bool:
        """True when nothing changes."""
        return not self.changes

    def to_dict(self) -> dict[str, Any]:
        """JSON form: kinds, affected operators and the changes."""
        return {"kinds": list(self.kinds), "affected_operators": list(self.affected_operators),
                "changes": [c.to_dict() for c in self.changes]}


def diff_plans(old: PhysicalPlan, new: PhysicalPlan) -> PlanDiff:
    """The changes that turn ``old`` into ``new``."""
    changes = _logic_changes(old, new) + _resource_changes(old, new) + _workload_changes(old, new)
    return PlanDiff(changes=tuple(changes))


def _logic_changes(old: PhysicalPlan, new: PhysicalPlan) -> list[PlanChange]:
    old_ops = {op.id: op for op in old.graph.operators}
    new_ops = {op.id: op for op in new.graph.operators}
    changes = []
    for op_id in new_ops.keys() - old_ops.keys():
        changes.append(PlanChange("logic", (op_id,), f"operator {op_id} added"))
    for op_id in old_ops.keys() - new_ops.keys():
        changes.append(PlanChange("logic", (op_id,), f"operator {op_id} removed"))
    for op_id in sorted(old_ops.keys() & new_ops.keys()):
        before, after = old_ops[op_id], new_ops[op_id]
        if before.type != after.type:
            changes.append(PlanChange("logic", (op_id,),
                                      f"type of {op_id}: {before.type} -> {after.type}"))
        elif dict(before.params) != dict(after.params):
            names = sorted(k for k in set(before.params) | set(after.params)
                           if before.params.get(k) != after.params.get(k))
            changes.append(PlanChange("logic", (op_id,),
                                      f"params of {op_id} changed: {', '.join(names)}"))
    old_edges, new_edges = set(old.graph.edges), set(new.graph.edges)
    for edge in sorted(new_edges - old_edges, key=str):
        changes.append(PlanChange("logic", (edge.target,), f"edge {edge} added"))
    for edge in sorted(old_edges - new_edges, key=str):
        touched = (edge.target,) if edge.target in new_ops else (edge.source,)
        changes.append(PlanChange("logic", touched, f"edge {edge} removed"))
    return sorted(changes, key=lambda c: (c.operators, c.detail))


def _resource_changes(old: PhysicalPlan, new: PhysicalPlan) -> list[PlanChange]:
    old_ops = {op.id: op for op in old.operators}
    changes = []
    for op in new.operators:
        before = old_ops.get(op.id)
        if before is not None and before.parallelism != op.parallelism:
            changes.append(PlanChange("resources", (op.id,),
                                      f"instances of {op.id}: {before.parallelism} -> "
                                      f"{op.parallelism} "
                                      f"({op.parallelism - before.parallelism:+d})"))
    return changes


def _workload_changes(old: PhysicalPlan, new: PhysicalPlan) -> list[PlanChange]:
    changes = []
    for op_id, after in new.assignments.items():
        before = old.assignments.get(op_id)
        if before is None or before.key_groups != after.key_groups:
            continue  # a new keyed operator is a logic change; nothing is re-mapped
        moves = assignment_diff(before, after).moves
        if moves:
            changes.append(PlanChange("workload", (op_id,),
                                      moves_detail(op_id, after.key_groups, moves)))
    return changes


def moves_detail(op_id: str, key_groups: int, moves: tuple[Move, ...]) -> str:
    """A workload change in words: how many key groups move, and which, between which
    instances ("5 of 64 key groups of counts change instance: 0-3 1->0, 9 0->2")."""
    return (f"{len(moves)} of {key_groups} key groups of {op_id} change instance: "
            f"{_moves_text(moves)}")


def ranges_moves_detail(op_id: str, key_groups: int, before: list[list[int]],
                        after: list[list[int]]) -> str | None:
    """``moves_detail`` of two assignments given as a driver acknowledges them,
    ``[[first key group, last key group, instance], ...]``; None when nothing moved."""
    old, new = _owners(key_groups, before), _owners(key_groups, after)
    moves = tuple(Move(kg, a, b) for kg, (a, b) in enumerate(zip(old, new, strict=True))
                  if a != b)
    return moves_detail(op_id, key_groups, moves) if moves else None


def _owners(key_groups: int, ranges: list[list[int]]) -> list[int]:
    owners = [0] * key_groups
    for first, last, instance in ranges:
        owners[first:last + 1] = [instance] * (last - first + 1)
    return owners


MOVES_SHOWN = 6
"""Runs of moved key groups named in a change's detail; the rest are counted."""


def _moves_text(moves: tuple[Move, ...]) -> str:
    """Moved key groups as runs that go between the same instances: "0-3 1->0, 9 0->2"."""
    runs: list[list[int]] = []  # [first, last, from, to]
    for move in moves:
        last = runs[-1] if runs else None
        if last and move.key_group == last[1] + 1 and \
                (move.from_instance, move.to_instance) == (last[2], last[3]):
            last[1] = move.key_group
        else:
            runs.append([move.key_group, move.key_group, move.from_instance, move.to_instance])
    shown = [f"{a}{'' if a == b else f'-{b}'} {i}->{j}" for a, b, i, j in runs[:MOVES_SHOWN]]
    more = len(runs) - MOVES_SHOWN
    return ", ".join(shown) + (f" and {more} more run{'s' if more > 1 else ''}" if more > 0
                               else "")
