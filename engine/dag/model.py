"""Immutable job graph model: operators, edges and the graph that holds them."""

from __future__ import annotations

import copy
import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

DEFAULT_KEY_GROUPS = 128


def _frozen_params(params: Mapping[str, Any]) -> Mapping[str, Any]:
    # A deep copy keeps the graph immune to later edits of the caller's dict.
    return MappingProxyType(copy.deepcopy(dict(params)))


@dataclass(frozen=True)
class Operator:
    """One logical operator of a job: its id, catalog type, params and parallelism."""

    id: str
    type: str
    params: Mapping[str, Any] = field(default_factory=dict)
    parallelism: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", _frozen_params(self.params))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Operator):
            return NotImplemented
        return (self.id, self.type, dict(self.params), self.parallelism) == (
            other.id,
            other.type,
            dict(other.params),
            other.parallelism,
        )

    __hash__ = None  # type: ignore[assignment]  # params are a mapping

    def to_dict(self) -> dict[str, Any]:
        """The operator as it appears in the DAG document."""
        doc: dict[str, Any] = {"id": self.id, "type": self.type, "params": _plain(self.params)}
        if self.parallelism != 1:
            doc["parallelism"] = self.parallelism
        return doc


@dataclass(frozen=True)
class Edge:
    """A stream from ``source`` to ``target`` (JSON keys ``from`` / ``to``)."""

    source: str
    target: str

    def to_dict(self) -> dict[str, str]:
        """The edge as it appears in the DAG document."""
        return {"from": self.source, "to": self.target}

    def __str__(self) -> str:
        return f"{self.source} -> {self.target}"


@dataclass(frozen=True)
class JobGraph:
    """A validated job graph. Build it with ``parse_job_graph`` to get the checks."""

    name: str
    key_groups: int = DEFAULT_KEY_GROUPS
    operators: tuple[Operator, ...] = ()
    edges: tuple[Edge, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "operators", tuple(self.operators))
        object.__setattr__(self, "edges", tuple(self.edges))
        # Indexes built once, so graph checks stay linear in operators + edges.
        parents: dict[str, list[str]] = {}
        children: dict[str, list[str]] = {}
        for e in self.edges:
            parents.setdefault(e.target, []).append(e.source)
            children.setdefault(e.source, []).append(e.target)
        object.__setattr__(self, "_by_id", {op.id: op for op in self.operators})
        object.__setattr__(self, "_parents", {k: tuple(v) for k, v in parents.items()})
        object.__setattr__(self, "_children", {k: tuple(v) for k, v in children.items()})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JobGraph):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def to_dict(self) -> dict[str, Any]:
        """The DAG document of this graph (parse_job_graph(g.to_dict()) == g)."""
        return {
            "name": self.name,
            "key_groups": self.key_groups,
            "operators": [op.to_dict() for op in self.operators],
            "edges": [e.to_dict() for e in self.edges],
        }

    def operator_ids(self) -> tuple[str, ...]:
        """Operator ids in document order."""
        return tuple(op.id for op in self.operators)

    def operator(self, op_id: str) -> Operator:
        """The operator with this id; KeyError if there is none."""
        return self._by_id[op_id]  # type: ignore[attr-defined, no-any-return]

    def parents(self, op_id: str) -> tuple[str, ...]:
        """Ids of the operators with an edge into ``op_id``, in edge order."""
        return self._parents.get(op_id, ())  # type: ignore[attr-defined, no-any-return]

    def children(self, op_id: str) -> tuple[str, ...]:
        """Ids of the operators ``op_id`` has an edge to, in edge order."""
        return self._children.get(op_id, ())  # type: ignore[attr-defined, no-any-return]

    def sources(self) -> tuple[str, ...]:
        """Operators without inputs, in document order."""
        targets = {e.target for e in self.edges}
        return tuple(op.id for op in self.operators if op.id not in targets)

    def sinks(self) -> tuple[str, ...]:
        """Operators without outputs, in document order."""
        origins = {e.source for e in self.edges}
        return tuple(op.id for op in self.operators if op.id not in origins)

    def topological_order(self) -> tuple[str, ...]:
        """Operator ids, parents before children; ties keep document order.

        Raises ValueError if the edges contain a cycle.
        """
        order = topological_order(self.operator_ids(), self.edges)
        if order is None:
            raise ValueError(f"job graph {self.name!r} has a cycle")
        return order

    def with_parallelism(self, op_id: str, parallelism: int) -> JobGraph:
        """A copy with one operator's parallelism changed (no validation)."""
        return self._with_operator(replace(self.operator(op_id), parallelism=parallelism))

    def with_params(self, op_id: str, params: Mapping[str, Any]) -> JobGraph:
        """A copy with one operator's params replaced (no validation)."""
        return self._with_operator(replace(self.operator(op_id), params=params))

    def _with_operator(self, new: Operator) -> JobGraph:
        ops = tuple(new if op.id == new.id else op for op in self.operators)
        return replace(self, operators=ops)


def topological_order(ids: tuple[str, ...], edges: tuple[Edge, ...]) -> tuple[str, ...] | None:
    """Kahn's order of ``ids`` (document order breaks ties), or None on a cycle."""
    position = {op_id: i for i, op_id in enumerate(ids)}
    indegree = dict.fromkeys(ids, 0)
    children: dict[str, list[str]] = {op_id: [] for op_id in ids}
    for e in edges:
        if e.source in position and e.target in position:
            indegree[e.target] += 1
            children[e.source].append(e.target)
    ready = [position[op_id] for op_id in ids if indegree[op_id] == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        current = ids[heapq.heappop(ready)]
        order.append(current)
        for child in children[current]:
            indegree[child] -= 1
            if indegree[child] == 0:
                heapq.heappush(ready, position[child])
    return tuple(order) if len(order) == len(ids) else None


def _plain(value: Any) -> Any:
    """Convert read-only mappings back to plain JSON-able dicts and lists."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
