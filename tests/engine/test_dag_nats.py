"""Validation of source.nats params: each param alone and the params together; the URL's
password masked like a Redis source's."""

from __future__ import annotations

from typing import Any

import pytest

from engine.dag import output_columns, parse_job_graph
from engine.dag.secrets import masked_document
from tests.engine.builders import counted_by_window, with_source_params
from tests.engine.test_dag_validation import problems_of

SOURCE = {"id": "events", "type": "source.nats",
          "params": {"url": "nats://app:secret@127.0.0.1:4333", "streams": ["ORDERS"],
                     "schema": {"user": "long", "at": "timestamp", "kind": "string"},
                     "time_field": "at"}}
DOC = counted_by_window(SOURCE)


def test_a_valid_nats_source_and_its_columns() -> None:
    parse_job_graph(with_source_params(DOC, start={"ORDERS": 41}, url="env:ORDERS_NATS"))
    assert output_columns(parse_job_graph(DOC))["events"] == {
        "user": "long", "at": "timestamp", "kind": "string"}


def test_without_a_time_field_rows_carry_the_stream_time() -> None:
    doc = with_source_params(DOC, time_field=None)
    doc["operators"][1]["params"]["time"] = "event_time"
    assert output_columns(parse_job_graph(doc))["events"]["event_time"] == "timestamp"


@pytest.mark.parametrize(("params", "problem"), [
    ({"url": "redis://host:6379/0"}, "param 'url': must be a URL like nats://host:4222"),
    ({"url": "nats://host:4222/x"}, "param 'url': must be a URL like nats://host:4222"),
    ({"url": "nats://host:99999"}, "param 'url': must be a URL like nats://host:4222"),
    ({"url": "nats://"}, "param 'url': names no host"),
    ({"url": "env:1X"}, "param 'url': names no environment variable"),
    ({"streams": []}, "param 'streams': must be a non-empty list of stream keys"),
    ({"start": "now"}, "param 'start': must be earliest, latest or {stream: sequence number"),
    ({"start": {"ORDERS": "5-0"}}, "param 'start': must be earliest, latest"),
    ({"start": {"ORDERS": -1}}, "param 'start': must be earliest, latest"),
    ({"start": {"OTHER": 5}},
     "start must give a sequence for exactly the streams (missing ['ORDERS'], "
     "not a stream ['OTHER'])"),
    ({"payload": "json"}, "unknown param 'payload'"),
    ({"time_field": "kind"}, "time_field 'kind' must have type timestamp, not string"),
    ({"schema": {"user": "long", "at": "timestamp", "blob": "binary"}},
     "schema column 'blob': type 'binary' cannot be decoded from a stream entry"),
])
def test_bad_params_are_named(params: dict[str, Any], problem: str) -> None:
    found = problems_of(with_source_params(DOC, **params))
    assert any(p.startswith("operator 'events': ") and problem in p for p in found), found


def test_the_password_is_masked_and_never_in_a_problem() -> None:
    shown = masked_document(DOC)["operators"][0]["params"]["url"]
    assert shown == "nats://app:***@127.0.0.1:4333"
    found = problems_of(with_source_params(DOC, url="ftp://user:secret@host/"))
    assert found and all("secret" not in p for p in found)
