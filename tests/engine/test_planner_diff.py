"""Plan diffs classify changes as workload, resources or logic."""

from __future__ import annotations

from engine.dag import Edge, JobGraph, Operator
from engine.mapping import weighted_assignment
from engine.planner import diff_plans, plan_job


def test_same_plan_has_no_changes(campaign_graph: JobGraph) -> None:
    diff = diff_plans(plan_job(campaign_graph), plan_job(campaign_graph))
    assert diff.is_empty()
    assert diff.to_dict() == {"kinds": [], "affected_operators": [], "changes": []}


def test_rescale_of_a_keyed_operator_is_resources_and_workload(
        campaign_graph: JobGraph) -> None:
    diff = diff_plans(plan_job(campaign_graph),
                      plan_job(campaign_graph.with_parallelism("counts", 6)))
    assert diff.kinds == ("workload", "resources")
    assert diff.affected_operators == ("counts",)
    assert "4 -> 6" in next(c.detail for c in diff.changes if c.kind == "resources")


def test_rescale_of_a_stateless_operator_is_resources_only(campaign_graph: JobGraph) -> None:
    diff = diff_plans(plan_job(campaign_graph),
                      plan_job(campaign_graph.with_parallelism("views", 2)))
    assert diff.kinds == ("resources",)
    assert diff.affected_operators == ("views",)


def test_rebalance_is_workload_only(campaign_graph: JobGraph) -> None:
    loads = [10.0 if kg < 8 else 1.0 for kg in range(128)]
    rebalanced = plan_job(campaign_graph, {"counts": weighted_assignment(loads, 4)})
    diff = diff_plans(plan_job(campaign_graph), rebalanced)
    assert diff.kinds == ("workload",)
    assert diff.changes[0].operators == ("counts",)


def test_logic_changes(campaign_graph: JobGraph) -> None:
    new_params = campaign_graph.with_params("views", {"condition": "event_type = 'click'"})
    diff = diff_plans(plan_job(campaign_graph), plan_job(new_params))
    assert diff.kinds == ("logic",)
    assert diff.changes[0].detail == "params of views changed: condition"
    extra = JobGraph(
        name=campaign_graph.name, key_groups=campaign_graph.key_groups,
        operators=(*campaign_graph.operators, Operator("audit", "sink.memory")),
        edges=(*campaign_graph.edges, Edge("views", "audit")),
    )
    diff = diff_plans(plan_job(campaign_graph), plan_job(extra))
    assert set(diff.affected_operators) == {"audit"}
    assert {c.detail for c in diff.changes} == {"operator audit added",
                                                 "edge views -> audit added"}


def test_moved_key_groups_are_named_in_runs_between_instances():
    from engine.planner import ranges_moves_detail

    before = [[0, 7, 0], [8, 15, 1]]
    after = [[0, 3, 0], [4, 9, 1], [10, 15, 0]]
    assert ranges_moves_detail("counts", 16, before, after) == (
        "10 of 16 key groups of counts change instance: 4-7 0->1, 10-15 1->0")
    assert ranges_moves_detail("counts", 16, before, before) is None
