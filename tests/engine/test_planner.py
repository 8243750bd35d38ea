"""Planner phases: pinned operators, fused regions, routing, ordered merges."""

from __future__ import annotations

import json

from hypothesis import given, settings

from engine.dag import JobGraph, parse_job_graph, stored_job_graph, validate_graph
from engine.errors import DagValidationError
from engine.planner import PHASES, PhysicalPlan, plan_job
from engine.planner.phases import describe_operators
from tests.engine.builders import document, random_graphs


def chain(types: list[str], parallelism: list[int], params: dict[int, dict] | None = None,
          *, checked: bool = True) -> JobGraph:
    ids = [f"o{i}" for i in range(len(types))]
    doc = document(zip(ids, ids[1:], strict=False), dict(zip(ids, types, strict=True)),
                   dict(zip(ids, parallelism, strict=True)))
    for index, value in (params or {}).items():
        doc["operators"][index]["params"] = value
    return parse_job_graph(doc) if checked else stored_job_graph(doc)


AGG = {"key": ["user_id"], "time": "event_time", "window": "1 minute",
       "aggregates": {"n": "count(*)", "total": "sum(amount)"}}


def test_campaign_plan(campaign_graph: JobGraph) -> None:
    plan = plan_job(campaign_graph).to_dict()
    regions = {tuple(r["operators"]): r for r in plan["regions"]}
    assert regions[("events",)]["routing"] == "none"
    assert regions[("views",)]["routing"] == "round_robin"
    assert regions[("counts",)]["routing"] == "key_group"
    assert regions[("counts",)]["parallelism"] == 4
    assert regions[("counts",)]["key"] == ["campaign_id"]
    assert regions[("out",)]["routing"] == "none"
    assert plan["pinned"] == {}
    assert plan["assignments"]["counts"]["ranges"][0] == [0, 31, 0]
    json.dumps(plan)


def test_compatible_chain_fuses_into_one_keyed_region() -> None:
    graph = chain(["source.generator", "filter", "map", "window_aggregate", "sink.postgres"],
                  [1, 3, 3, 3, 1], {3: AGG})
    plan = plan_job(graph)
    region = plan.region_of("o1")
    assert region.operators == ("o1", "o2", "o3")
    assert region.routing == "key_group"
    assert region.key == ("user_id",)


def test_map_rewriting_the_key_breaks_the_region() -> None:
    graph = chain(["source.generator", "map", "window_aggregate", "sink.postgres"],
                  [1, 2, 2, 1], {1: {"columns": {"user_id": "user_id % 10"}}, 2: AGG})
    plan = plan_job(graph)
    assert plan.region_of("o1").operators == ("o1",)
    assert plan.region_of("o2").operators == ("o2",)


def test_different_parallelism_or_branches_do_not_fuse() -> None:
    graph = chain(["source.generator", "filter", "map", "sink.memory"], [1, 2, 4, 1])
    assert plan_job(graph).region_of("o1").operators == ("o1",)
    doc = document([("s", "f"), ("f", "a"), ("f", "b"), ("a", "k1"), ("b", "k2")],
                   {"s": "source.generator", "f": "filter", "a": "map", "b": "map",
                    "k1": "sink.memory", "k2": "sink.memory"})
    plan = plan_job(parse_job_graph(doc))
    assert plan.region_of("f").operators == ("f",)
    assert plan.region_of("a").inputs == (plan.region_of("f").id,)


# The job checks refuse keyless state (the runtime cannot run it); the planner still pins any
# it is given, as a document stored before that rule would have it.
def test_global_state_is_pinned_with_a_reason() -> None:
    graph = chain(["source.generator", "window_aggregate", "sink.postgres"], [1, 1, 1],
                  {1: {**AGG, "key": []}}, checked=False)
    plan = plan_job(graph)
    assert plan.operator("o1").max_parallelism == 1
    assert "global state" in plan.pinned()["o1"]
    assert plan.region_of("o1").kind == "pinned"
    assert plan.region_of("o1").routing == "none"
    assert plan.to_dict()["operators"]["o1"]["pinned_reason"] == plan.pinned()["o1"]


def test_ordered_merge_before_an_ordered_sink() -> None:
    filtered = plan_job(chain(["source.generator", "filter", "sink.memory"], [1, 4, 1]))
    assert filtered.region_of("o1").ordered_merge
    assert filtered.region_of("o1").merge == "sequence_pulse"
    mapped = plan_job(chain(["source.generator", "map", "sink.files"], [1, 4, 1],
                            {2: {"path": "out", "format": "json"}}))
    assert mapped.region_of("o1").merge == "round_robin"
    unordered = plan_job(chain(["source.generator", "filter", "sink.postgres"], [1, 4, 1]))
    assert not unordered.region_of("o1").ordered_merge


def test_phases_are_pure(campaign_graph: JobGraph) -> None:
    empty = PhysicalPlan(graph=campaign_graph)
    described = describe_operators(empty)
    assert empty.operators == ()
    assert len(described.operators) == 4
    assert len(PHASES) >= 5


def _check_plan(graph: JobGraph, plan: PhysicalPlan) -> None:
    placed = [op for region in plan.regions for op in region.operators]
    assert sorted(placed) == sorted(graph.operator_ids())  # each operator in one region
    for region in plan.regions:
        assert {plan.operator(o).parallelism for o in region.operators} == {region.parallelism}
        assert region.routing in ("round_robin", "key_group", "none")
        if region.kind != "parallel":
            assert region.routing == "none" and len(region.operators) == 1
    for op in plan.operators:
        if op.pinned_reason:
            assert op.max_parallelism == 1
            assert plan.region_of(op.id).kind in ("pinned", "source", "sink")
        if op.state_kind == "keyed" and plan.region_of(op.id).kind == "parallel":
            assert plan.region_of(op.id).routing == "key_group"


@settings(max_examples=120, deadline=None)
@given(random_graphs())
def test_random_dags_never_crash_the_planner(graph: JobGraph) -> None:
    plan = plan_job(graph)
    _check_plan(graph, plan)
    json.dumps(plan.to_dict())
    validate_graph(graph)  # may report problems, must not crash
    try:
        parse_job_graph(graph.to_dict())
    except DagValidationError as error:
        assert error.problems




def test_window_aggregate_without_key_is_a_pinned_global_aggregate() -> None:
    graph = chain(["source.generator", "window_aggregate", "sink.postgres"], [1, 1, 1],
                  {1: {key: value for key, value in AGG.items() if key != "key"}}, checked=False)
    plan = plan_job(graph).to_dict()
    assert plan["operators"]["o1"]["state_kind"] == "global"
    region = next(r for r in plan["regions"] if r["operators"] == ["o1"])
    assert region["routing"] == "none"
    assert "global state" in region["pinned_reason"]
