"""Stela scale-out: hand out n new instances one at a time by ETP."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from engine.dag.model import JobGraph
from engine.dag.state import max_parallelism
from engine.errors import PolicyError, Problem
from engine.policies.etp import DEFAULT_THRESHOLD, compute_etp, overflow
from engine.policies.rates import RatesView


@dataclass(frozen=True)
class ScaleOutResult:
    """Parallelism of every operator after scale-out, and who got each new instance."""

    parallelism: dict[str, int]
    steps: list[str]

    def to_dict(self) -> dict[str, object]:
        """The JSON answer of ``python -m engine scale-out``."""
        return {"parallelism": dict(self.parallelism), "steps": list(self.steps)}


def plan_scale_out(graph: JobGraph, rates: RatesView, instances: int,
                   threshold: float = DEFAULT_THRESHOLD,
                   fixed: Collection[str] = ()) -> ScaleOutResult:
    """Give up to ``instances`` new instances, each to the congested operator of highest ETP.

    Ties go to the larger overflow (``in - processing``), then to the operator that comes
    first in the document. After each step the chosen operator's processing and output
    rates are projected by ``(p+1)/p`` and ETP is recomputed. Stops early when no
    operator that may take another instance (pinned: 1, others: key_groups) is congested.
    ``fixed``: operators whose parallelism cannot change (a running job's sinks), which
    never get an instance.
    """
    if instances < 0:
        raise PolicyError([Problem("scale-out", f"instances must be >= 0, got {instances}")])
    parallelism = {op.id: op.parallelism for op in graph.operators}
    limits = {op.id: op.parallelism if op.id in fixed else max_parallelism(graph, op)
              for op in graph.operators}
    projected = dict(rates)
    steps: list[str] = []
    for _ in range(instances):
        chosen = _pick(graph, projected, parallelism, limits, threshold)
        if chosen is None:
            break
        p = parallelism[chosen]
        projected[chosen] = projected[chosen].scaled((p + 1) / p)
        parallelism[chosen] = p + 1
        steps.append(chosen)
    return ScaleOutResult(parallelism=parallelism, steps=steps)


def _pick(graph: JobGraph, rates: RatesView, parallelism: dict[str, int],
          limits: dict[str, int], threshold: float) -> str | None:
    result = compute_etp(graph, rates, threshold)
    order = {op_id: i for i, op_id in enumerate(graph.operator_ids())}
    candidates = [op for op in result.congested if parallelism[op] < limits[op]]
    if not candidates:
        return None
    # Rounding keeps float noise (0.1 + 0.2 != 0.3) from breaking ties the rule calls equal.
    return max(candidates, key=lambda op: (round(result.etp[op], 9),
                                           round(overflow(graph, rates, op), 6), -order[op]))
