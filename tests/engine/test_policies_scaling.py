"""Stela scale-out and scale-in, DS2 recommendations, rates parsing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.dag import JobGraph, max_parallelism, parse_job_graph, stored_job_graph
from engine.errors import PolicyError, RatesError
from engine.policies import (
    OperatorRates,
    Rates,
    parse_placement,
    parse_rates,
    plan_scale_in,
    plan_scale_out,
    recommend_parallelism,
)
from tests.engine.builders import document, load_example, random_graphs, rates_of


def test_stela_first_instance_goes_to_o3(stela_graph: JobGraph, stela_rates: Rates) -> None:
    result = plan_scale_out(stela_graph, stela_rates, 1)
    assert result.steps == ["o3"]  # tie with o4 on ETP and overflow: document order
    assert result.parallelism["o3"] == 2
    assert result.parallelism["o4"] == 1


def test_scale_out_projects_rates_and_recomputes(stela_graph: JobGraph,
                                                 stela_rates: Rates) -> None:
    # After o3 doubles, its projected output (4000) congests the sink o7 (processing 2000),
    # whose overflow (2000) beats o4's (1000) on equal ETP.
    result = plan_scale_out(stela_graph, stela_rates, 3)
    assert result.steps == ["o3", "o7", "o4"]


def test_scale_out_stops_when_nothing_is_congested(campaign_graph: JobGraph) -> None:
    rates = parse_rates(load_example("campaign_views_rates.json"), campaign_graph)
    result = plan_scale_out(campaign_graph, rates, 10)
    # 16000 rows/s arrive; 4 instances process 10000. At 5 (12500) it is still congested
    # (16000 > 1.2 x 12500), at 6 (15000) it is not, so the rest are not handed out.
    assert result.steps == ["counts", "counts"]
    assert result.parallelism == {"events": 1, "views": 1, "counts": 6, "out": 1}


def test_scale_out_respects_pinned_operators(campaign_doc: dict) -> None:
    # A keyless aggregate (global state): the job checks refuse it, the planner still pins it.
    campaign_doc["operators"][2]["params"]["key"] = []
    campaign_doc["operators"][2]["parallelism"] = 1
    graph = stored_job_graph(campaign_doc)
    rates = parse_rates(load_example("campaign_views_rates.json"), graph)
    assert plan_scale_out(graph, rates, 3).steps == []
    with pytest.raises(PolicyError):
        plan_scale_out(graph, rates, -1)


def test_scale_out_and_in_leave_fixed_operators_alone(stela_graph: JobGraph,
                                                     stela_rates: Rates) -> None:
    from engine.policies.instances_in import plan_scale_in_instances

    # o7 (a sink) would get the second instance; fixed, it never does.
    result = plan_scale_out(stela_graph, stela_rates, 3, fixed={"o7"})
    assert "o7" not in result.steps and result.parallelism["o7"] == 1
    wide = stela_graph.with_parallelism("o7", 2)
    assert plan_scale_in_instances(wide, stela_rates, 1, fixed={"o7"}).steps != ["o7"]
    assert plan_scale_in_instances(wide, stela_rates, 5, fixed={"o7"}).parallelism["o7"] == 2


def test_stela_scale_in(stela_graph: JobGraph, stela_rates: Rates) -> None:
    placement = parse_placement(load_example("stela_placement.json"), stela_graph)
    result = plan_scale_in(stela_graph, stela_rates, placement, 1)
    assert result.removed == ["m2"]
    assert result.placement == {"m1": ["o1", "o3", "o7", "o2", "o6"],
                                "m3": ["o4", "o8", "o9", "o10", "o5"]}


def test_scale_in_several_machines_and_limits(stela_graph: JobGraph,
                                              stela_rates: Rates) -> None:
    placement = parse_placement(load_example("stela_placement.json"), stela_graph)
    result = plan_scale_in(stela_graph, stela_rates, placement, 2)
    assert result.removed == ["m2", "m1"]
    assert sorted(result.placement["m3"]) == sorted(f"o{i}" for i in range(1, 11))
    with pytest.raises(PolicyError):
        plan_scale_in(stela_graph, stela_rates, placement, 3)


def ds2_graph(sources: int = 1) -> JobGraph:
    types = {f"src{i}": "source.generator" for i in range(sources)}
    types.update({"op1": "map", "op2": "sink.memory"})
    edges = [(f"src{i}", "op1") for i in range(sources)] + [("op1", "op2")]
    return parse_job_graph(document(edges, types))


@pytest.mark.parametrize(("source_rate", "op1", "op2_processing", "expected"), [
    (100, (50, 400), 100, {"op1": 2, "op2": 8}),  # DS2's published case
    (200, (40, 700), 99, {"op1": 5, "op2": 36}),
    (200, (10, 700), 201, {"op1": 20, "op2": 70}),
])
def test_ds2_vectors(source_rate: float, op1: tuple[float, float], op2_processing: float,
                     expected: dict[str, int]) -> None:
    graph = ds2_graph()
    processing, output = op1
    rates = parse_rates(rates_of({"src0": (None, None, source_rate),
                                  "op1": (source_rate, processing, output),
                                  "op2": (output, op2_processing, output)}), graph)
    assert recommend_parallelism(graph, rates) == expected


def test_ds2_two_sources_and_target_rate() -> None:
    graph = ds2_graph(sources=2)
    rates = parse_rates(rates_of({"src0": (None, None, 100), "src1": (None, None, 100),
                                  "op1": (200, 50, 400), "op2": (400, 100, 400)}), graph)
    assert recommend_parallelism(graph, rates) == {"op1": 4, "op2": 16}
    assert recommend_parallelism(graph, rates, target_rate=50) == {"op1": 2, "op2": 8}
    assert recommend_parallelism(graph, rates, target_rate=0) == {"op1": 1, "op2": 1}


def test_ds2_uses_per_instance_capacity(campaign_graph: JobGraph) -> None:
    rates = parse_rates(load_example("campaign_views_rates.json"), campaign_graph)
    # counts: 4 instances process 10000 rows/s, 2500 each; 16000 rows/s need 7.
    assert recommend_parallelism(campaign_graph, rates)["counts"] == 7


def test_rates_problems_are_all_reported(campaign_graph: JobGraph) -> None:
    with pytest.raises(RatesError) as caught:
        parse_rates({"events": {"output_rate": -1}, "views": {"input_rate": 1},
                     "counts": "fast", "ghost": {"output_rate": 1}}, campaign_graph)
    found = [str(p) for p in caught.value.problems]
    assert "rates of operator 'ghost': unknown operator id (not in the job graph)" in found
    assert "rates of operator 'events': 'output_rate' must be >= 0, got -1" in found
    assert "rates of operator 'views': missing field 'processing_rate'" in found
    assert any(p.startswith("rates of operator 'counts': must be an object") for p in found)
    assert "rates of operator 'out': missing (every operator needs rates)" in found
    with pytest.raises(RatesError):
        parse_rates([], campaign_graph)


@settings(max_examples=60, deadline=None)
@given(random_graphs(), st.integers(0, 12), st.data())
def test_scale_out_and_ds2_stay_within_limits(graph: JobGraph, instances: int,
                                              data: st.DataObject) -> None:
    rate = st.floats(0.1, 1e5, allow_nan=False)
    rates = Rates({op: OperatorRates(data.draw(rate), data.draw(rate), data.draw(rate))
                   for op in graph.operator_ids()})
    result = plan_scale_out(graph, rates, instances)
    assert len(result.steps) <= instances
    before = {op.id: op.parallelism for op in graph.operators}
    assert sum(result.parallelism.values()) - sum(before.values()) == len(result.steps)
    for op in graph.operators:
        assert result.parallelism[op.id] <= max(op.parallelism, max_parallelism(graph, op))
    recommended = recommend_parallelism(graph, rates)
    assert set(recommended) == set(graph.operator_ids()) - set(graph.sources())
    assert all(1 <= recommended[op.id] <= max_parallelism(graph, op)
               for op in graph.operators if op.id in recommended)
