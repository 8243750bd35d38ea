"""Fusing chains of compatible operators into parallel regions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.planner.plan import OperatorPlan, PhysicalPlan, Region, RegionKind


@dataclass
class _Draft:
    kind: RegionKind
    operators: list[str]
    parallelism: int
    key: tuple[str, ...] = ()
    written: set[str] = field(default_factory=set)  # columns rewritten by maps in the chain


def fuse_chains(plan: PhysicalPlan) -> list[Region]:
    """Regions in topological order.

    Sources, sinks and pinned operators stand alone. A stateless or keyed operator joins
    its parent's region when it is the parent's only child, the parent its only input,
    both have the same parallelism, and the rows stay partitioned by the region's key
    (same key, and no map in the chain rewrites a key column).
    """
    graph = plan.graph
    drafts: list[_Draft] = []
    draft_of: dict[str, _Draft] = {}
    for op_id in graph.topological_order():
        op = plan.operator(op_id)
        draft = _extendable(plan, op, draft_of)
        if draft is None:
            draft = _Draft(kind=_kind(op), operators=[], parallelism=op.parallelism)
            drafts.append(draft)
        draft.operators.append(op_id)
        if op.state_kind == "keyed" and not draft.key:
            draft.key = op.key
        draft.written |= _written_columns(plan, op_id)
        draft_of[op_id] = draft
    return [Region(id=f"r{i + 1}", kind=d.kind, operators=tuple(d.operators),
                   parallelism=d.parallelism, key=d.key) for i, d in enumerate(drafts)]


def _kind(op: OperatorPlan) -> RegionKind:
    if op.role in ("source", "sink"):
        return "source" if op.role == "source" else "sink"
    return "pinned" if op.pinned_reason is not None else "parallel"


def _extendable(plan: PhysicalPlan, op: OperatorPlan, draft_of: dict[str, _Draft]) -> _Draft | None:
    graph = plan.graph
    parents = graph.parents(op.id)
    if _kind(op) != "parallel" or len(parents) != 1:
        return None
    parent = parents[0]
    draft = draft_of[parent]
    if draft.kind != "parallel" or draft.operators[-1] != parent:
        return None
    if len(graph.children(parent)) != 1 or draft.parallelism != op.parallelism:
        return None
    if op.state_kind == "keyed":
        if draft.key and set(draft.key) != set(op.key):
            return None
        if draft.written & set(op.key):
            return None
    return draft


def _written_columns(plan: PhysicalPlan, op_id: str) -> set[str]:
    op = plan.graph.operator(op_id)
    if op.type != "map":
        return set()
    columns = op.params.get("columns")
    return {str(c) for c in columns} if isinstance(columns, Mapping) else set()
