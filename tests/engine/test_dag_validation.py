"""parse_job_graph: every problem of a document, each naming the operator or edge."""

from __future__ import annotations

from typing import Any

import pytest

from engine.dag import parse_job_graph
from engine.errors import DagValidationError
from tests.engine.builders import document


def problems_of(doc: Any) -> list[str]:
    with pytest.raises(DagValidationError) as caught:
        parse_job_graph(doc)
    return [str(p) for p in caught.value.problems]


def test_valid_campaign_document(campaign_doc: dict) -> None:
    assert parse_job_graph(campaign_doc).name == "campaign-views"


@pytest.mark.parametrize("doc", [None, [], "x", 3])
def test_document_must_be_an_object(doc: Any) -> None:
    assert problems_of(doc) == [f"document: must be a JSON object, got {_kind(doc)}"]


def _kind(doc: Any) -> str:
    return {type(None): "null", list: "a list", str: "a string", int: "int"}[type(doc)]


def test_all_problems_reported_at_once(campaign_doc: dict) -> None:
    campaign_doc["operators"][1]["params"] = {"condition": "event_type = "}
    campaign_doc["operators"][2]["parallelism"] = 500
    campaign_doc["operators"][3]["type"] = "sink.nowhere"
    campaign_doc["edges"].append({"from": "views", "to": "ghost"})
    found = problems_of(campaign_doc)
    assert any(p.startswith("operator 'views': param 'condition': bad expression") for p in found)
    assert "operator 'counts': parallelism 500 is above key_groups (128)" in found
    assert any(p.startswith("operator 'out': unknown type 'sink.nowhere'") for p in found)
    assert "edge views -> ghost: unknown operator 'ghost'" in found


def test_ids_must_be_unique_and_well_formed(campaign_doc: dict) -> None:
    campaign_doc["operators"][1]["id"] = "events"
    campaign_doc["operators"].append({"id": "Bad-Id", "type": "filter"})
    found = problems_of(campaign_doc)
    assert "operator 'events': duplicate operator id" in found
    assert "operator #5: 'id' must match [a-z][a-z0-9_]*, got 'Bad-Id'" in found


def test_cycle_is_named() -> None:
    doc = document([("src", "a"), ("a", "b"), ("b", "c"), ("c", "a"), ("c", "out")],
                   {"src": "source.generator", "a": "filter", "b": "filter", "c": "filter",
                    "out": "sink.memory"})
    assert "operator 'a': is on a cycle: a -> b -> c -> a" in problems_of(doc)


def test_self_loop_and_duplicate_edge() -> None:
    doc = document([("src", "f"), ("src", "f"), ("f", "f"), ("f", "out")],
                   {"src": "source.generator", "f": "filter", "out": "sink.memory"})
    found = problems_of(doc)
    assert "edge src -> f: duplicate edge" in found
    assert "edge f -> f: self loop: an operator cannot feed itself" in found


def test_roles_sources_sinks_and_inputs() -> None:
    doc = document([("a", "src"), ("out", "f"), ("f", "out2")],
                   {"a": "source.generator", "src": "source.generator", "f": "filter",
                    "out": "sink.memory", "out2": "sink.memory", "lonely": "filter"})
    found = problems_of(doc)
    assert "operator 'src': source type source.generator cannot have inputs (has a)" in found
    assert "operator 'out': sink type sink.memory cannot have outputs (feeds f)" in found
    assert "operator 'lonely': has no inputs (only sources may have none)" in found
    assert ("operator 'lonely': has no outputs and is not a sink: its rows reach no sink"
            in found)
    assert "operator 'a': its output reaches no sink" in found
    assert "operator 'out2': unreachable sink: no source feeds it" in found


def test_join_needs_two_inputs() -> None:
    doc = document([("src", "j"), ("j", "out")],
                   {"src": "source.generator", "j": "join", "out": "sink.memory"})
    doc["operators"][1]["params"] = {"key": ["user_id"], "time": "event_time",
                                     "within": "1 minute"}
    assert "operator 'j': join needs exactly 2 inputs, has 1" in problems_of(doc)


def test_params_missing_extra_and_wrongly_typed() -> None:
    doc = document([("src", "out")], {"src": "source.generator", "out": "sink.postgres"})
    doc["operators"][0]["params"] = {"keys": 0, "skew": -1, "colour": "red"}
    doc["operators"][1]["params"] = {"table": "drop table;"}
    found = problems_of(doc)
    assert "operator 'src': missing required param 'rows_per_second'" in found
    assert "operator 'src': param 'keys': must be an integer > 0, got 0" in found
    assert "operator 'src': param 'skew': must be a number >= 0, got -1" in found
    assert any(p.startswith("operator 'src': unknown param 'colour'") for p in found)
    assert any(p.startswith("operator 'out': param 'table'") for p in found)


def test_bad_intervals_and_aggregates(campaign_doc: dict) -> None:
    params = campaign_doc["operators"][2]["params"]
    params["window"] = "ten seconds"
    params["watermark"] = "5 parsecs"
    params["aggregates"] = {"views": "median(amount)"}
    found = problems_of(campaign_doc)
    assert any("param 'window': must be an interval" in p for p in found)
    assert any("param 'watermark': must be an interval" in p for p in found)
    assert any("param 'aggregates'" in p and "median" in p for p in found)


def test_key_and_time_columns_must_exist(campaign_doc: dict) -> None:
    params = campaign_doc["operators"][2]["params"]
    params["key"] = ["campaign"]
    params["time"] = "amount"
    params["aggregates"] = {"total": "sum(price)"}
    found = problems_of(campaign_doc)
    assert any(p.startswith("operator 'counts': key column 'campaign' is not in the input")
               for p in found)
    assert "operator 'counts': time column 'amount' has type double, not timestamp" in found
    assert any(p.startswith("operator 'counts': aggregate 'total': column 'price'")
               for p in found)


def test_union_inputs_must_agree() -> None:
    doc = document([("gen", "u"), ("rate", "u"), ("u", "out")],
                   {"gen": "source.generator", "rate": "source.rate", "u": "filter",
                    "out": "sink.memory"})
    doc["operators"][1]["params"] = {"rows_per_second": 5}
    found = problems_of(doc)
    assert any(p.startswith("operator 'u': union inputs disagree on columns") for p in found)


def test_parallelism_limits(campaign_doc: dict) -> None:
    campaign_doc["operators"][1]["parallelism"] = 0
    found = problems_of(campaign_doc)
    assert "operator 'views': parallelism must be an integer >= 1, got 0" in found


@pytest.mark.parametrize("op_type", ["window_aggregate", "dedupe", "join"])
def test_a_keyed_operator_needs_a_key(op_type: str) -> None:
    # The runtime partitions every keyed operator's state by its key: a keyless one (a global
    # aggregate) would pass the checks and fail in the driver, so the checks refuse it.
    params = {"time": "event_time", "window": "10 seconds", "aggregates": {"n": "count(*)"}} \
        if op_type == "window_aggregate" else {"time": "event_time", "within": "10 seconds"}
    inputs = 2 if op_type == "join" else 1
    ops = [{"id": f"s{n}", "type": "source.generator", "params": {"rows_per_second": 1}}
           for n in range(inputs)]
    ops += [{"id": "k", "type": op_type, "params": params},
            {"id": "out", "type": "sink.memory", "params": {}}]
    doc = {"name": "keyless", "operators": ops,
           "edges": [*({"from": f"s{n}", "to": "k"} for n in range(inputs)),
                     {"from": "k", "to": "out"}]}
    assert "operator 'k': missing required param 'key'" in problems_of(doc)
    params["key"] = []
    assert any(p.startswith("operator 'k': param 'key': must be a list of 1 to")
               for p in problems_of(doc))


def test_sliding_window_longer_slide_rejected(campaign_doc: dict) -> None:
    campaign_doc["operators"][2]["params"]["slide"] = "1 minute"
    assert ("operator 'counts': slide '1 minute' is longer than window '10 seconds'"
            in problems_of(campaign_doc))


def test_wrong_shapes() -> None:
    found = problems_of({"name": 3, "key_groups": "many", "operators": {}, "edges": "none"})
    assert "document: 'name' must be a non-empty string, got 3" in found
    assert "document: 'key_groups' must be an integer in 1..32768, got 'many'" in found
    assert "document: 'operators' must be a non-empty list" in found
    assert "document: 'edges' must be a list, got a string" in found


def test_problem_str_is_one_line(campaign_doc: dict) -> None:
    campaign_doc["operators"][1]["params"]["condition"] = "(a"
    for line in problems_of(campaign_doc):
        assert "\n" not in line
