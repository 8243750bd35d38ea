"""Validation of source.redis_stream params: each param alone and the params together."""

from __future__ import annotations

from typing import Any

import pytest

from engine.dag import output_columns, parse_job_graph
from tests.engine.builders import counted_by_window, with_source_params
from tests.engine.test_dag_validation import problems_of

SOURCE = {"id": "events", "type": "source.redis_stream",
          "params": {"url": "redis://:secret@127.0.0.1:6380/0", "streams": ["orders"],
                     "schema": {"user": "long", "at": "timestamp", "kind": "string"},
                     "time_field": "at"}}
DOC = counted_by_window(SOURCE)


def test_a_valid_stream_source_and_its_columns() -> None:
    graph = parse_job_graph(DOC)
    assert output_columns(graph)["events"] == {"user": "long", "at": "timestamp",
                                               "kind": "string"}


def test_without_a_time_field_rows_carry_the_entry_time() -> None:
    doc = with_source_params(DOC, time_field=None)
    doc["operators"][1]["params"]["time"] = "event_time"
    assert output_columns(parse_job_graph(doc))["events"]["event_time"] == "timestamp"


@pytest.mark.parametrize(("params", "problem"), [
    ({"url": "http://host"}, "param 'url': must be a URL like redis://host:6379/0"),
    ({"url": "redis://"}, "param 'url': names no host"),
    ({"streams": []}, "param 'streams': must be a non-empty list of stream keys"),
    ({"streams": ["a", "a"]}, "param 'streams': lists a stream twice"),
    ({"start": "now"}, "param 'start': must be earliest, latest or {stream: entry id"),
    ({"start": {"orders": "x-1"}}, "param 'start': must be earliest, latest"),
    ({"start": {"other": "5-0"}},
     "start must give an entry id for exactly the streams (missing ['orders'], "
     "not a stream ['other'])"),
    ({"max_entries_per_epoch": 0}, "param 'max_entries_per_epoch': must be an integer > 0"),
    ({"payload": "avro"}, "param 'payload': must be one of ['fields', 'json']"),
    ({"time_field": "kind"}, "time_field 'kind' must have type timestamp, not string"),
    ({"time_field": "when"}, "time_field 'when' is not a schema column"),
    ({"schema": {"user": "long", "at": "timestamp", "blob": "binary"}},
     "schema column 'blob': type 'binary' cannot be decoded from a stream entry"),
    ({"schema": None}, "missing required param 'schema'"),
])
def test_bad_params_are_named(params: dict[str, Any], problem: str) -> None:
    found = problems_of(with_source_params(DOC, **params))
    assert any(p.startswith("operator 'events': ") and problem in p for p in found), found


def test_a_bad_url_problem_never_shows_the_password() -> None:
    found = problems_of(with_source_params(DOC, url="ftp://user:secret@host/"))
    assert found and all("secret" not in p for p in found)
