"""Auto-parallelization planner: ordered pure phases from a job graph to a physical plan,
and diffs between plans."""

from __future__ import annotations

from collections.abc import Mapping

from engine.dag.model import JobGraph
from engine.mapping.assignment import Assignment
from engine.planner.diff import PlanChange, PlanDiff, diff_plans, ranges_moves_detail
from engine.planner.phases import PHASES, Phase
from engine.planner.plan import OperatorPlan, PhysicalPlan, Region


def plan_job(graph: JobGraph, assignments: Mapping[str, Assignment] | None = None) -> PhysicalPlan:
    """Run every planner phase on ``graph`` (a validated, acyclic job graph).

    ``assignments`` optionally carries the current key-group mapping of keyed operators
    (e.g. after a rebalance); those that fit the new parallelism are kept.
    """
    plan = PhysicalPlan(graph=graph, assignments=dict(assignments or {}))
    for phase in PHASES:
        plan = phase(plan)
    return plan


__all__ = [
    "PHASES",
    "OperatorPlan",
    "Phase",
    "PhysicalPlan",
    "PlanChange",
    "PlanDiff",
    "Region",
    "diff_plans",
    "plan_job",
    "ranges_moves_detail",
]
