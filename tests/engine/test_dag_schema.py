"""Output columns inferred through the graph."""

from __future__ import annotations

import pytest

from engine.dag import JobGraph, known_output_columns, output_columns, parse_job_graph
from engine.dag.catalog import OPERATOR_TYPES
from engine.dag.expressions import expression_problems
from engine.dag.syntax import interval_seconds
from engine.errors import DagValidationError
from tests.engine.builders import document


def test_generator_and_window_aggregate_columns(campaign_graph: JobGraph) -> None:
    columns = output_columns(campaign_graph)
    assert list(columns["events"]) == ["event_id", "event_time", "campaign_id", "user_id",
                                       "event_type", "amount"]
    assert columns["events"]["event_time"] == "timestamp"
    assert columns["counts"] == {"campaign_id": "long", "window_start": "timestamp",
                                 "window_end": "timestamp", "views": "long"}
    assert columns["out"] == columns["counts"]


def test_map_adds_and_replaces_columns() -> None:
    doc = document([("src", "m"), ("m", "out")],
                   {"src": "source.generator", "m": "map", "out": "sink.memory"})
    doc["operators"][1]["params"] = {"columns": {"amount": "amount * 2", "copy": "user_id",
                                                 "flag": "CAST(amount AS string)"}}
    columns = output_columns(parse_job_graph(doc))["m"]
    assert columns["amount"] == "unknown"
    assert columns["copy"] == "long"
    assert columns["flag"] == "string"
    assert "event_time" in columns


def test_rate_source_and_join_columns() -> None:
    doc = document([("a", "j"), ("b", "j"), ("j", "out")],
                   {"a": "source.generator", "b": "source.generator", "j": "join",
                    "out": "sink.memory"})
    doc["operators"][2]["params"] = {"key": ["user_id"], "time": "event_time",
                                     "within": "30 seconds", "watermark": "10 seconds"}
    graph = parse_job_graph(doc)
    assert set(output_columns(graph)["j"]) >= {"user_id", "event_time", "amount"}


def test_a_file_source_needs_its_schema() -> None:
    # Spark's file stream infers no schema: the catalog asks for it, as the runtime does.
    doc = document([("files", "d"), ("d", "out")],
                   {"files": "source.files", "d": "dedupe", "out": "sink.memory"})
    doc["operators"][0]["params"] = {"path": "data/in", "format": "json"}
    with pytest.raises(DagValidationError) as refused:
        parse_job_graph(doc)
    assert "operator 'files': missing required param 'schema'" in str(refused.value)


def test_catalog_declares_state_and_roles() -> None:
    assert OPERATOR_TYPES["window_aggregate"].state_kind == "keyed"
    assert OPERATOR_TYPES["filter"].state_kind == "stateless"
    assert OPERATOR_TYPES["join"].inputs == 2
    assert OPERATOR_TYPES["source.generator"].defaults()["keys"] == 1000
    assert {t.role for t in OPERATOR_TYPES.values()} == {"source", "operator", "sink"}


def test_intervals_and_expressions() -> None:
    assert interval_seconds("10 seconds") == 10
    assert interval_seconds("1 minute") == 60
    assert interval_seconds("500 milliseconds") == 0.5
    assert interval_seconds("0 seconds") is None
    assert interval_seconds("soon") is None
    assert interval_seconds("0.0000001 seconds") is None
    assert interval_seconds("1000000000 days") is None
    assert expression_problems("event_type = 'view'") == []
    assert expression_problems("lower(name) IN ('a', 'b')") == []
    assert expression_problems("") == ["expression is empty"]
    assert expression_problems("(a = 1") != []
    assert expression_problems("a = 'x") != []
    assert expression_problems("a AND") != []


def test_an_unfinished_graph_knows_the_columns_of_its_sound_operators():
    document = {
        "name": "unfinished",
        "operators": [
            {"id": "events", "type": "source.generator", "params": {"rows_per_second": 10}},
            {"id": "wide", "type": "map", "params": {"columns": {"double": "amount * 2"}}},
            {"id": "broken", "type": "filter", "params": {"condition": "amount / 0 > 1 AND"}},
            {"id": "after", "type": "filter", "params": {"condition": "amount > 1"}},
        ],
        "edges": [{"from": "events", "to": "wide"}, {"from": "wide", "to": "broken"},
                  {"from": "broken", "to": "after"}],
    }
    with pytest.raises(DagValidationError) as refused:
        parse_job_graph(document)
    problems = refused.value.problems
    assert any("nothing follows 'AND'" in p.message for p in problems)
    columns = known_output_columns(document, list(problems))
    # No sink yet: events and wide are still known; broken and what follows it are not.
    assert set(columns) == {"events", "wide"}
    assert "double" in columns["wide"] and "amount" in columns["events"]
