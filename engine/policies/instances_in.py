"""Scale-in by instances: take instances from the operators whose loss costs least (lowest ETP).

Stela's scale-in removes whole machines; this is its per-instance counterpart for a job whose
instances are virtual: each step removes one instance from the operator with the lowest ETP
among those running more than one, ties going to the smaller load per instance
(input over processing), then to the operator that comes later in the document.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from engine.dag import JobGraph
from engine.policies.etp import DEFAULT_THRESHOLD, compute_etp
from engine.policies.rates import RatesView


@dataclass(frozen=True)
class ScaleInInstancesResult:
    """New parallelism per operator and the operator that lost each instance, in order."""

    parallelism: dict[str, int]
    steps: list[str]


def plan_scale_in_instances(graph: JobGraph, rates: RatesView, instances: int,
                            threshold: float = DEFAULT_THRESHOLD,
                            fixed: Collection[str] = ()) -> ScaleInInstancesResult:
    """Remove up to ``instances`` instances; stops early when every operator runs one.
    ``fixed``: operators whose parallelism cannot change, which never lose one."""
    parallelism = {op.id: op.parallelism for op in graph.operators}
    etp = compute_etp(graph, rates, threshold).etp
    order = {op.id: index for index, op in enumerate(graph.operators)}
    steps: list[str] = []
    for _ in range(max(0, instances)):
        candidates = [op_id for op_id, p in parallelism.items() if p > 1 and op_id not in fixed]
        if not candidates:
            break
        chosen = min(candidates, key=lambda op_id: (
            etp.get(op_id, 0.0), _load(rates, op_id) / parallelism[op_id], -order[op_id]))
        parallelism[chosen] -= 1
        steps.append(chosen)
    return ScaleInInstancesResult(parallelism=parallelism, steps=steps)


def _load(rates: RatesView, op_id: str) -> float:
    entry = rates.get(op_id)
    if entry is None or not entry.processing_rate:
        return 0.0
    return (entry.input_rate or 0.0) / entry.processing_rate
