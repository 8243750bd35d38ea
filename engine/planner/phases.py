"""The planner phases, each a pure ``(PhysicalPlan) -> PhysicalPlan`` step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from engine.dag.catalog import OPERATOR_TYPES, ORDER_SENSITIVE_SINKS
from engine.dag.state import key_columns_of, max_parallelism, pinned_reason, state_kind_of
from engine.mapping.assignment import Assignment, balanced_assignment
from engine.planner.fusion import fuse_chains
from engine.planner.plan import Merge, OperatorPlan, PhysicalPlan, Region

Phase = Callable[[PhysicalPlan], PhysicalPlan]


def describe_operators(plan: PhysicalPlan) -> PhysicalPlan:
    """Read state kind, key, selectivity and parallelism limits of every operator."""
    graph = plan.graph
    described = []
    for op in graph.operators:
        op_type = OPERATOR_TYPES.get(op.type)
        described.append(OperatorPlan(
            id=op.id, type=op.type,
            role=op_type.role if op_type else "operator",
            state_kind=state_kind_of(op),
            selectivity=op_type.selectivity if op_type else "any",
            key=key_columns_of(op),
            parallelism=op.parallelism,
            max_parallelism=max_parallelism(graph, op),
            pinned_reason=pinned_reason(op),
        ))
    return replace(plan, operators=tuple(described))


def form_regions(plan: PhysicalPlan) -> PhysicalPlan:
    """Fuse compatible chains into regions and record each operator's region."""
    regions = fuse_chains(plan)
    region_of = {op_id: r.id for r in regions for op_id in r.operators}
    operators = tuple(replace(op, region=region_of[op.id]) for op in plan.operators)
    return replace(plan, regions=tuple(regions), operators=operators)


def choose_routing(plan: PhysicalPlan) -> PhysicalPlan:
    """Key-group routing into keyed regions, round-robin into stateless ones."""
    routed = []
    for region in plan.regions:
        if region.kind != "parallel":
            routed.append(replace(region, routing="none"))
        elif region.key or any(plan.operator(o).state_kind == "keyed" for o in region.operators):
            routed.append(replace(region, routing="key_group"))
        else:
            routed.append(replace(region, routing="round_robin"))
    return replace(plan, regions=tuple(routed))


def connect_regions(plan: PhysicalPlan) -> PhysicalPlan:
    """Record, for each region, the regions that feed it."""
    graph = plan.graph
    region_of = {op.id: op.region for op in plan.operators}
    connected = []
    for region in plan.regions:
        inputs: list[str] = []
        for op_id in region.operators:
            for parent in graph.parents(op_id):
                source = region_of[parent]
                if source != region.id and source is not None and source not in inputs:
                    inputs.append(source)
        connected.append(replace(region, inputs=tuple(inputs)))
    return replace(plan, regions=tuple(connected))


def order_merges(plan: PhysicalPlan) -> PhysicalPlan:
    """Ask for an order-preserving merge where a parallel region feeds an ordered sink."""
    merged = []
    for region in plan.regions:
        if region.kind == "parallel" and region.parallelism > 1 and _order_matters(plan, region):
            merged.append(replace(region, ordered_merge=True, merge=_merge_strategy(plan, region)))
        else:
            merged.append(region)
    return replace(plan, regions=tuple(merged))


def _order_matters(plan: PhysicalPlan, region: Region) -> bool:
    """True if rows leaving the region reach an order-sensitive sink before any keyed
    or global operator (which defines its own output order) re-groups them."""
    graph, pending, seen = plan.graph, list(graph_children(plan, region)), set()
    while pending:
        op_id = pending.pop()
        if op_id in seen:
            continue
        seen.add(op_id)
        op = plan.operator(op_id)
        if op.role == "sink":
            if op.type in ORDER_SENSITIVE_SINKS:
                return True
        elif op.state_kind == "stateless":
            pending.extend(graph.children(op_id))
    return False


def graph_children(plan: PhysicalPlan, region: Region) -> list[str]:
    """Operators outside ``region`` that its last operator feeds."""
    return [c for c in plan.graph.children(region.operators[-1]) if c not in region.operators]


def _merge_strategy(plan: PhysicalPlan, region: Region) -> Merge:
    selectivities = {plan.operator(o).selectivity for o in region.operators}
    if selectivities == {"exactly_one"}:
        return "round_robin" if region.routing == "round_robin" else "sequence"
    # Operators may drop rows: pulses tell the merger that no smaller sequence is coming.
    return "sequence_pulse"


def assign_key_groups(plan: PhysicalPlan) -> PhysicalPlan:
    """Give each keyed operator of a key-group region its assignment (balanced unless
    the plan already carries one of the right parallelism)."""
    assignments: dict[str, Assignment] = {}
    for region in plan.regions:
        if region.routing != "key_group":
            continue
        for op_id in region.operators:
            if plan.operator(op_id).state_kind != "keyed":
                continue
            given = plan.assignments.get(op_id)
            if given is not None and given.parallelism == region.parallelism \
                    and given.key_groups == plan.graph.key_groups:
                assignments[op_id] = given
            else:
                assignments[op_id] = balanced_assignment(plan.graph.key_groups,
                                                         region.parallelism)
    return replace(plan, assignments=assignments)


PHASES: tuple[Phase, ...] = (
    describe_operators,
    form_regions,
    choose_routing,
    connect_regions,
    order_merges,
    assign_key_groups,
)
"""The planner, in order."""
