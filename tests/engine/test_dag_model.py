"""JobGraph model: navigation, order, immutability, round trip."""

from __future__ import annotations

import pytest

from engine.dag import Edge, JobGraph, Operator, parse_job_graph, stored_job_graph
from engine.errors import DagValidationError


def test_navigation(campaign_graph: JobGraph) -> None:
    assert campaign_graph.sources() == ("events",)
    assert campaign_graph.sinks() == ("out",)
    assert campaign_graph.parents("counts") == ("views",)
    assert campaign_graph.children("views") == ("counts",)
    assert campaign_graph.operator("counts").parallelism == 4
    assert campaign_graph.key_groups == 128
    with pytest.raises(KeyError):
        campaign_graph.operator("nope")


def test_topological_order_keeps_document_order_for_ties() -> None:
    graph = JobGraph(
        name="t",
        operators=(Operator("b", "x"), Operator("a", "x"), Operator("c", "x")),
        edges=(Edge("b", "c"), Edge("a", "c")),
    )
    assert graph.topological_order() == ("b", "a", "c")


def test_topological_order_rejects_cycles() -> None:
    graph = JobGraph(name="t", operators=(Operator("a", "x"), Operator("b", "x")),
                     edges=(Edge("a", "b"), Edge("b", "a")))
    with pytest.raises(ValueError):
        graph.topological_order()


def test_round_trip(campaign_doc: dict) -> None:
    graph = parse_job_graph(campaign_doc)
    assert parse_job_graph(graph.to_dict()) == graph
    assert graph.to_dict()["edges"][0] == {"from": "events", "to": "views"}


def test_a_stored_document_reads_as_the_graph_its_check_gave(campaign_doc: dict) -> None:
    """A document checked when it was stored reads back as the same graph, without its
    params checked again (a filter's condition is not parsed); one without a graph's shape
    is still refused, naming what is wrong."""
    assert stored_job_graph(campaign_doc) == parse_job_graph(campaign_doc)
    unchecked = {**campaign_doc, "operators": [
        {**op, "params": {"condition": "not checked here"}} if op["id"] == "views" else op
        for op in campaign_doc["operators"]]}
    assert stored_job_graph(unchecked).operator("views").params["condition"] == "not checked here"
    with pytest.raises(DagValidationError, match="key_groups"):
        stored_job_graph({**campaign_doc, "key_groups": 0})


def test_with_parallelism_and_params_return_new_graphs(campaign_graph: JobGraph) -> None:
    wider = campaign_graph.with_parallelism("counts", 8)
    assert wider.operator("counts").parallelism == 8
    assert campaign_graph.operator("counts").parallelism == 4
    changed = campaign_graph.with_params("views", {"condition": "true"})
    assert changed.operator("views").params == {"condition": "true"}
    assert campaign_graph.operator("views").params["condition"] == "event_type = 'view'"


def test_params_are_isolated_from_the_callers_dict() -> None:
    params = {"condition": "a > 1"}
    op = Operator("f", "filter", params)
    params["condition"] = "changed"
    assert op.params["condition"] == "a > 1"
    with pytest.raises(TypeError):
        op.params["condition"] = "x"  # type: ignore[index]
