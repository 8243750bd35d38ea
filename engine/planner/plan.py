"""The physical plan: operators with their limits, grouped into parallel regions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.dag.catalog import Selectivity, StateKind
from engine.dag.model import JobGraph
from engine.mapping.assignment import Assignment

Routing = Literal["round_robin", "key_group", "none"]
RegionKind = Literal["source", "sink", "pinned", "parallel"]
Merge = Literal["unordered", "round_robin", "sequence", "sequence_pulse"]


@dataclass(frozen=True)
class OperatorPlan:
    """How one operator runs: state kind, key, parallelism and limits, region."""

    id: str
    type: str
    role: str
    state_kind: StateKind
    selectivity: Selectivity
    key: tuple[str, ...]
    parallelism: int
    max_parallelism: int
    pinned_reason: str | None = None
    region: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (pinned_reason only for pinned operators)."""
        doc: dict[str, Any] = {
            "type": self.type, "role": self.role, "state_kind": self.state_kind,
            "selectivity": self.selectivity, "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism, "region": self.region,
        }
        if self.key:
            doc["key"] = list(self.key)
        if self.pinned_reason is not None:
            doc["pinned_reason"] = self.pinned_reason
        return doc


@dataclass(frozen=True)
class Region:
    """A chain of operators that runs as one unit with one parallelism.

    Rows enter split by ``routing`` (key group of ``key``, or round-robin) and leave
    merged; ``ordered_merge`` means the merge restores the sequential order (``merge``
    says how: by round-robin, sequence numbers, or sequence numbers with pulses).
    """

    id: str
    kind: RegionKind
    operators: tuple[str, ...]
    parallelism: int
    routing: Routing = "none"
    key: tuple[str, ...] = ()
    ordered_merge: bool = False
    merge: Merge = "unordered"
    inputs: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        doc: dict[str, Any] = {
            "id": self.id, "kind": self.kind, "operators": list(self.operators),
            "routing": self.routing, "parallelism": self.parallelism,
            "ordered_merge": self.ordered_merge, "merge": self.merge,
            "inputs": list(self.inputs),
        }
        if self.key:
            doc["key"] = list(self.key)
        return doc


@dataclass(frozen=True)
class PhysicalPlan:
    """The output of the planner phases for one job graph.

    ``assignments`` holds the key-group -> instance mapping of every keyed operator
    that runs in a key-group-routed region.
    """

    graph: JobGraph
    operators: tuple[OperatorPlan, ...] = ()
    regions: tuple[Region, ...] = ()
    assignments: Mapping[str, Assignment] = field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PhysicalPlan):
            return NotImplemented
        return self.to_dict() == other.to_dict() and self.graph == other.graph

    __hash__ = None  # type: ignore[assignment]

    def operator(self, op_id: str) -> OperatorPlan:
        """The plan of one operator; KeyError if unknown."""
        for op in self.operators:
            if op.id == op_id:
                return op
        raise KeyError(op_id)

    def region_of(self, op_id: str) -> Region:
        """The region that runs ``op_id``; KeyError if unknown."""
        for region in self.regions:
            if op_id in region.operators:
                return region
        raise KeyError(op_id)

    def pinned(self) -> dict[str, str]:
        """Operator id -> why it must run as one instance."""
        return {op.id: op.pinned_reason for op in self.operators if op.pinned_reason}

    def _region_dict(self, region: Region) -> dict[str, Any]:
        doc = region.to_dict()
        reasons = [self.operator(o).pinned_reason for o in region.operators]
        if region.kind == "pinned" and reasons[0]:
            doc["pinned_reason"] = reasons[0]
        return doc

    def to_dict(self) -> dict[str, Any]:
        """The JSON printed by ``python -m engine plan``."""
        return {
            "job": self.graph.name,
            "key_groups": self.graph.key_groups,
            "regions": [self._region_dict(r) for r in self.regions],
            "operators": {op.id: op.to_dict() for op in self.operators},
            "pinned": self.pinned(),
            "assignments": {op: {"ranges": [list(r) for r in a.ranges()]}
                            for op, a in self.assignments.items()},
        }
