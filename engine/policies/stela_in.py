"""Stela scale-in: remove the machines whose instances matter least (lowest ETP sum)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.dag.model import JobGraph
from engine.errors import PlacementError, PolicyError, Problem
from engine.policies.etp import DEFAULT_THRESHOLD, compute_etp
from engine.policies.rates import RatesView

Placement = dict[str, list[str]]
"""Machine -> operator ids, one entry per instance placed there."""


@dataclass(frozen=True)
class ScaleInResult:
    """Machines removed (in removal order) and the placement of all instances after."""

    removed: list[str]
    placement: Placement

    def to_dict(self) -> dict[str, object]:
        """The JSON answer of ``python -m engine scale-in``."""
        return {"removed": list(self.removed),
                "placement": {m: list(ops) for m, ops in self.placement.items()}}


def parse_placement(doc: Any, graph: JobGraph) -> Placement:
    """A placement document checked against ``graph``; PlacementError lists every problem."""
    if not isinstance(doc, Mapping) or not doc:
        raise PlacementError([Problem("placement", "must be a non-empty JSON object of "
                                                   "machine -> list of operator ids")])
    known = set(graph.operator_ids())
    problems = []
    for machine, ops in doc.items():
        where = f"placement of machine {machine!r}"
        if not isinstance(ops, list) or not all(isinstance(o, str) for o in ops):
            problems.append(Problem(where, "must be a list of operator ids"))
            continue
        problems += [Problem(where, f"unknown operator id {o!r}") for o in ops if o not in known]
    if problems:
        raise PlacementError(problems)
    return {str(m): list(ops) for m, ops in doc.items()}


def machine_etp_sums(placement: Placement, instance_etp: Mapping[str, float]) -> dict[str, float]:
    """ETP sum of each machine: the ETP of every instance it runs."""
    return {m: sum(instance_etp[op] for op in ops) for m, ops in placement.items()}


def plan_scale_in(graph: JobGraph, rates: RatesView, placement: Placement, machines: int,
                  threshold: float = DEFAULT_THRESHOLD) -> ScaleInResult:
    """Remove ``machines`` machines one at a time, lowest ETP sum first.

    An instance's ETP is its operator's ETP divided by the operator's number of instances
    in the placement (each instance carries an equal part of the operator's work). The
    removed machine's instances go round-robin to the remaining machines, lowest ETP sum
    first. Ties between machines keep the placement document's order.
    """
    if not 1 <= machines < len(placement):
        raise PolicyError([Problem("scale-in", f"can remove 1..{len(placement) - 1} of "
                                               f"{len(placement)} machines, not {machines}")])
    etp = compute_etp(graph, rates, threshold).etp
    counts = Counter(op for ops in placement.values() for op in ops)
    instance_etp = {op: etp[op] / counts[op] for op in counts}
    current = {m: list(ops) for m, ops in placement.items()}
    removed: list[str] = []
    for _ in range(machines):
        victim = _lowest(current, instance_etp)
        moving = current.pop(victim)
        removed.append(victim)
        receivers = _ascending(current, instance_etp)
        for i, op in enumerate(moving):
            current[receivers[i % len(receivers)]].append(op)
    return ScaleInResult(removed=removed, placement=current)


def _ascending(placement: Placement, instance_etp: Mapping[str, float]) -> list[str]:
    sums = machine_etp_sums(placement, instance_etp)
    order = {m: i for i, m in enumerate(placement)}
    # Rounding keeps float noise from reordering machines with equal sums.
    return sorted(placement, key=lambda m: (round(sums[m], 9), order[m]))


def _lowest(placement: Placement, instance_etp: Mapping[str, float]) -> str:
    return _ascending(placement, instance_etp)[0]
