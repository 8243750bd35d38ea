"""Congestion and Effective Throughput Percentage (Stela), with set semantics."""

from __future__ import annotations

from dataclasses import dataclass

from engine.dag.model import JobGraph
from engine.policies.rates import RatesView

DEFAULT_THRESHOLD = 1.2


@dataclass(frozen=True)
class EtpResult:
    """ETP of every operator (0..1) and the congested operators in DAG order."""

    etp: dict[str, float]
    congested: list[str]

    def to_dict(self) -> dict[str, object]:
        """The JSON answer of ``python -m engine etp``."""
        return {"etp": {op: round(v, 6) for op, v in self.etp.items()},
                "congested": list(self.congested)}


def input_rate(graph: JobGraph, rates: RatesView, op_id: str) -> float:
    """Rows/s arriving at ``op_id``: the sum of its parents' output rates."""
    return sum(rates[parent].output_rate for parent in graph.parents(op_id))


def overflow(graph: JobGraph, rates: RatesView, op_id: str) -> float:
    """Rows/s arriving beyond what the operator processes (``in - processing``)."""
    return input_rate(graph, rates, op_id) - (rates[op_id].processing_rate or 0.0)


def is_congested(graph: JobGraph, rates: RatesView, op_id: str,
                 threshold: float = DEFAULT_THRESHOLD) -> bool:
    """True when the parents send more than ``threshold`` x the processing rate."""
    if not graph.parents(op_id):
        return False  # sources have no input, so nothing can pile up in front of them
    processing = rates[op_id].processing_rate or 0.0
    return input_rate(graph, rates, op_id) > threshold * processing


def congested_operators(graph: JobGraph, rates: RatesView,
                        threshold: float = DEFAULT_THRESHOLD) -> list[str]:
    """Congested operator ids in document order."""
    return [op_id for op_id in graph.operator_ids()
            if is_congested(graph, rates, op_id, threshold)]


def compute_etp(graph: JobGraph, rates: RatesView,
                threshold: float = DEFAULT_THRESHOLD,
                congested: list[str] | None = None) -> EtpResult:
    """ETP(o): summed share of the sinks o reaches through uncongested operators only.

    A sink's share is its output rate over all sinks' output; a sink reachable along
    several paths counts once (set semantics). o's own congestion does not matter.
    ``congested`` overrides the congestion test (the runtime judges it per measured unit,
    a keyed operator or a fused region, against the offered load).
    """
    if congested is None:
        congested = congested_operators(graph, rates, threshold)
    else:
        congested = [op for op in graph.operator_ids() if op in set(congested)]
    blocked = set(congested)
    sinks = set(graph.sinks())
    total = sum(rates[s].output_rate for s in sinks)
    reachable: dict[str, frozenset[str]] = {}
    for op_id in reversed(graph.topological_order()):
        found: set[str] = {op_id} if op_id in sinks else set()
        for child in graph.children(op_id):
            if child not in blocked:
                found |= reachable[child]
        reachable[op_id] = frozenset(found)
    etp = {
        op_id: (min(1.0, sum(rates[s].output_rate for s in reachable[op_id]) / total)
                if total > 0 else 0.0)
        for op_id in graph.operator_ids()
    }
    return EtpResult(etp=etp, congested=congested)
