"""Validation of the broker sources' params (source.redis_stream, source.nats): each param
alone and the params together; the URL's password masked and never in a problem."""

from __future__ import annotations

from typing import Any

import pytest

from engine.dag import output_columns, parse_job_graph
from engine.dag.secrets import masked_document
from tests.engine.builders import counted_by_window, with_source_params
from tests.engine.test_dag_validation import problems_of

SCHEMA = {"user": "long", "at": "timestamp", "kind": "string"}
DOCS = {
    "redis_stream": counted_by_window({
        "id": "events", "type": "source.redis_stream",
        "params": {"url": "redis://:secret@127.0.0.1:6380/0", "streams": ["orders"],
                   "schema": SCHEMA, "time_field": "at"}}),
    "nats": counted_by_window({
        "id": "events", "type": "source.nats",
        "params": {"url": "nats://app:secret@127.0.0.1:4333", "streams": ["ORDERS"],
                   "schema": SCHEMA, "time_field": "at"}}),
}
each_source = pytest.mark.parametrize("source", DOCS)


@each_source
def test_a_valid_source_and_its_columns(source: str) -> None:
    assert output_columns(parse_job_graph(DOCS[source]))["events"] == SCHEMA


def test_a_nats_source_may_start_at_a_sequence_and_name_its_url_in_the_environment() -> None:
    parse_job_graph(with_source_params(DOCS["nats"], start={"ORDERS": 41}, url="env:ORDERS_NATS"))


@each_source
def test_without_a_time_field_rows_carry_the_broker_time(source: str) -> None:
    doc = with_source_params(DOCS[source], time_field=None)
    doc["operators"][1]["params"]["time"] = "event_time"
    assert output_columns(parse_job_graph(doc))["events"]["event_time"] == "timestamp"


@pytest.mark.parametrize(("source", "params", "problem"), [
    ("redis_stream", {"url": "http://host"},
     "param 'url': must be a URL like redis://host:6379/0"),
    ("redis_stream", {"url": "redis://"}, "param 'url': names no host"),
    ("redis_stream", {"streams": []},
     "param 'streams': must be a non-empty list of stream keys"),
    ("redis_stream", {"streams": ["a", "a"]}, "param 'streams': lists a stream twice"),
    ("redis_stream", {"start": "now"},
     "param 'start': must be earliest, latest or {stream: entry id"),
    ("redis_stream", {"start": {"orders": "x-1"}}, "param 'start': must be earliest, latest"),
    ("redis_stream", {"start": {"other": "5-0"}},
     "start must give an entry id for exactly the streams (missing ['orders'], "
     "not a stream ['other'])"),
    ("redis_stream", {"max_entries_per_epoch": 0},
     "param 'max_entries_per_epoch': must be an integer > 0"),
    ("redis_stream", {"payload": "avro"}, "param 'payload': must be one of ['fields', 'json']"),
    ("redis_stream", {"time_field": "when"}, "time_field 'when' is not a schema column"),
    ("redis_stream", {"schema": None}, "missing required param 'schema'"),
    ("nats", {"url": "redis://host:6379/0"}, "param 'url': must be a URL like nats://host:4222"),
    ("nats", {"url": "nats://host:4222/x"}, "param 'url': must be a URL like nats://host:4222"),
    ("nats", {"url": "nats://host:99999"}, "param 'url': must be a URL like nats://host:4222"),
    ("nats", {"url": "nats://"}, "param 'url': names no host"),
    ("nats", {"url": "env:1X"}, "param 'url': names no environment variable"),
    ("nats", {"streams": []}, "param 'streams': must be a non-empty list of stream keys"),
    ("nats", {"start": "now"},
     "param 'start': must be earliest, latest or {stream: sequence number"),
    ("nats", {"start": {"ORDERS": "5-0"}}, "param 'start': must be earliest, latest"),
    ("nats", {"start": {"ORDERS": -1}}, "param 'start': must be earliest, latest"),
    ("nats", {"start": {"OTHER": 5}},
     "start must give a sequence for exactly the streams (missing ['ORDERS'], "
     "not a stream ['OTHER'])"),
    ("nats", {"payload": "json"}, "unknown param 'payload'"),
    # The checks across params are the same for every broker source.
    *[(source, {"time_field": "kind"}, "time_field 'kind' must have type timestamp, not string")
      for source in DOCS],
    *[(source, {"schema": {"user": "long", "at": "timestamp", "blob": "binary"}},
       "schema column 'blob': type 'binary' cannot be decoded from a stream entry")
      for source in DOCS],
])
def test_bad_params_are_named(source: str, params: dict[str, Any], problem: str) -> None:
    found = problems_of(with_source_params(DOCS[source], **params))
    assert any(p.startswith("operator 'events': ") and problem in p for p in found), found


def test_the_nats_password_is_masked() -> None:
    shown = masked_document(DOCS["nats"])["operators"][0]["params"]["url"]
    assert shown == "nats://app:***@127.0.0.1:4333"


@each_source
def test_a_bad_url_problem_never_shows_the_password(source: str) -> None:
    found = problems_of(with_source_params(DOCS[source], url="ftp://user:secret@host/"))
    assert found and all("secret" not in p for p in found)
