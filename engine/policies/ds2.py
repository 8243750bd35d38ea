"""DS2: one-shot parallelism from true processing rates, in topological order."""

from __future__ import annotations

import math

from engine.dag.catalog import OPERATOR_TYPES
from engine.dag.model import JobGraph
from engine.dag.state import max_parallelism
from engine.errors import PolicyError, Problem
from engine.policies.rates import RatesView

# Ratios like 2.0000000000004 come from float noise, not from demand for another instance.
_EPSILON = 1e-9


def recommend_parallelism(graph: JobGraph, rates: RatesView,
                          target_rate: float | None = None) -> dict[str, int]:
    """DS2's parallelism for every non-source operator.

    Each source emits ``target_rate`` rows/s (default: its measured output rate). Then,
    in topological order, an operator's target input is the sum of its parents' target
    outputs, its parallelism is ``ceil(target input / per-instance capacity)`` (capacity =
    processing rate / current parallelism) and its target output is target input x
    selectivity. Results are kept within the operator's limits (1 if pinned, key_groups).
    """
    if target_rate is not None and (not math.isfinite(target_rate) or target_rate < 0):
        raise PolicyError([Problem("recommend", f"target rate must be >= 0, got {target_rate}")])
    target_out: dict[str, float] = {}
    result: dict[str, int] = {}
    problems: list[Problem] = []
    for op_id in graph.topological_order():
        op, op_rates = graph.operator(op_id), rates[op_id]
        if _is_source(graph, op_id):
            target_out[op_id] = op_rates.output_rate if target_rate is None else target_rate
            continue
        target_in = sum(target_out[parent] for parent in graph.parents(op_id))
        target_out[op_id] = target_in * op_rates.selectivity()
        capacity = (op_rates.processing_rate or 0.0) / op.parallelism
        if capacity <= 0:
            if target_in > 0:
                problems.append(Problem(f"rates of operator {op_id!r}", "processing_rate is 0: "
                                        "cannot size an operator that processes nothing"))
            result[op_id] = op.parallelism
            continue
        needed = max(1, math.ceil(target_in / capacity - _EPSILON))
        result[op_id] = min(needed, max_parallelism(graph, op))
    if problems:
        raise PolicyError(problems)
    return {op_id: result[op_id] for op_id in graph.operator_ids() if op_id in result}


def _is_source(graph: JobGraph, op_id: str) -> bool:
    op_type = OPERATOR_TYPES.get(graph.operator(op_id).type)
    if op_type is not None:
        return op_type.role == "source"
    return not graph.parents(op_id)
