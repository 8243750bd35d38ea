"""Congestion and ETP (Stela), set semantics."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.dag import JobGraph, parse_job_graph
from engine.policies import OperatorRates, Rates, compute_etp, parse_rates
from tests.engine.builders import document, random_graphs, rates_of


def test_stela_slide_example(stela_graph: JobGraph, stela_rates: Rates) -> None:
    result = compute_etp(stela_graph, stela_rates)
    assert result.congested == ["o3", "o4", "o6"]
    assert result.etp["o3"] == pytest.approx(4 / 9)
    assert result.etp["o4"] == pytest.approx(4 / 9)
    assert result.etp["o6"] == pytest.approx(1 / 9)
    assert result.etp["o1"] == 0  # both children congested
    assert result.etp["o5"] == 0  # its only child is congested
    assert result.etp["o7"] == pytest.approx(4 / 9)  # a sink's ETP is its share
    assert result.to_dict()["etp"] == {op: round(v, 6) for op, v in result.etp.items()}


def diamond(congested: bool = False) -> tuple[JobGraph, Rates]:
    graph = parse_job_graph(document(
        [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")],
        {"a": "source.generator", "b": "filter", "c": "map", "d": "sink.memory"}))
    c_processing = 10.0 if congested else 1000.0
    rates = parse_rates(rates_of({
        "a": (None, None, 100), "b": (100, 1000, 100), "c": (100, c_processing, 100),
        "d": (200, 1000, 200)}), graph)
    return graph, rates


def test_sink_reached_by_two_paths_counts_once() -> None:
    graph, rates = diamond()
    assert compute_etp(graph, rates).etp["a"] == 1.0


def test_one_congested_path_of_a_diamond_still_reaches_the_sink() -> None:
    graph, rates = diamond(congested=True)
    result = compute_etp(graph, rates)
    assert result.congested == ["c"]
    assert result.etp["a"] == 1.0
    assert result.etp["c"] == 1.0  # own congestion does not matter


def test_threshold_is_configurable() -> None:
    graph, rates = diamond()
    rates["b"] = OperatorRates(100, 90, 90)
    assert compute_etp(graph, rates).congested == []
    assert compute_etp(graph, rates, threshold=1.05).congested == ["b"]


def test_no_sink_output_gives_zero_etp(campaign_graph: JobGraph) -> None:
    rates = parse_rates(rates_of({"events": (None, None, 10), "views": (10, 10, 0),
                                  "counts": (0, 10, 0), "out": (0, 10, 0)}), campaign_graph)
    assert set(compute_etp(campaign_graph, rates).etp.values()) == {0.0}


def _random_rates(data: st.DataObject, graph: JobGraph) -> Rates:
    rate = st.floats(0, 1e6, allow_nan=False)
    return Rates({op: OperatorRates(data.draw(rate), data.draw(rate), data.draw(rate))
                  for op in graph.operator_ids()})


@settings(max_examples=100, deadline=None)
@given(random_graphs(), st.data())
def test_etp_in_unit_interval_and_set_semantics(graph: JobGraph, data: st.DataObject) -> None:
    rates = _random_rates(data, graph)
    result = compute_etp(graph, rates)
    assert set(result.etp) == set(graph.operator_ids())
    assert all(0.0 <= value <= 1.0 for value in result.etp.values())
    # Brute force: the sinks reachable through uncongested operators, each counted once.
    total = sum(rates[s].output_rate for s in graph.sinks())
    for op_id in graph.operator_ids():
        reached, stack = set(), [op_id]
        while stack:
            node = stack.pop()
            if node in graph.sinks():
                reached.add(node)
            stack += [c for c in graph.children(node) if c not in result.congested]
        expected = sum(rates[s].output_rate for s in reached) / total if total else 0.0
        assert result.etp[op_id] == pytest.approx(min(1.0, expected))
