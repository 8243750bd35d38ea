"""source.nats without Spark: how an epoch's sequence range is planned and capped, how
messages decode (in bulk, or one by one with dead letters), and the errors a user meets
for a missing stream, refused credentials and an unreachable server."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pyarrow as pa
import pytest

from engine.runtime.errors import UnsupportedJobError, failure_of
from engine.runtime.io.broker.columnar import arrow_schema
from engine.runtime.io.broker.nats_client import NatsSpec
from engine.runtime.io.broker.nats_offsets import (
    advance,
    initial_offset,
    nats_lags,
    take_sequences,
)
from engine.runtime.io.broker.nats_stream import decode_messages, part_ranges
from engine.runtime.io.broker.spec import BrokerUnavailable
from engine.runtime.io.taken import SequencesTaken, take_from_json
from tests.engine.runtime.nats_jobs import bodies, delete_streams, fill, new_stream

SCHEMA = {"event_id": "long", "event_time": "timestamp", "campaign_id": "long",
          "user_id": "long", "event_type": "string"}


def spec_of(url: str = "nats://127.0.0.1:1", streams: tuple[str, ...] = ("A", "B"),
            **params: object) -> NatsSpec:
    return NatsSpec.from_params("events", {"url": url, "streams": list(streams),
                                           "schema": SCHEMA, **params})


def test_a_new_run_starts_before_the_oldest_after_the_newest_or_after_given_sequences() -> None:
    bounds = {"A": (5, 20), "B": (1, 0)}
    assert initial_offset(spec_of(start="earliest"), bounds)["streams"] == {
        "A": {"seq": 4}, "B": {"seq": 0}}
    assert initial_offset(spec_of(start="latest"), bounds)["streams"] == {
        "A": {"seq": 20}, "B": {"seq": 0}}
    assert initial_offset(spec_of(start={"A": 7, "B": 0}), bounds)["streams"] == {
        "A": {"seq": 7}, "B": {"seq": 0}}


def test_the_cap_is_shared_and_a_stream_s_unused_share_goes_to_the_next() -> None:
    spec = spec_of(max_entries_per_epoch=100)
    start = {"op": "events", "streams": {"A": {"seq": 0}, "B": {"seq": 10}}}
    end = advance(spec, start, {"A": (1, 30), "B": (1, 500)})
    assert end["streams"] == {"A": {"seq": 30}, "B": {"seq": 80}}
    assert SequencesTaken(start, end).count == 100
    # Messages the stream's limits removed are skipped: the range starts at the oldest held.
    end = advance(spec, start, {"A": (200, 220), "B": (1, 10)})
    assert end["streams"] == {"A": {"seq": 220}, "B": {"seq": 10}}


def test_a_range_is_read_in_parts_that_cover_it_exactly() -> None:
    taken = SequencesTaken({"streams": {"A": {"seq": 3}}},
                           {"streams": {"A": {"seq": 25}, "B": {"seq": 4}, "C": {"seq": 0}}})
    assert list(part_ranges(taken, 10)) == [("A", 3, 13), ("A", 13, 23), ("A", 23, 25),
                                            ("B", 0, 4)]


def _schema(spec: NatsSpec) -> pa.Schema:
    """The rows' schema as the reader decodes into it."""
    return arrow_schema(spec.decoding())


def test_messages_decode_in_bulk_as_one_by_one_and_misfits_become_dead_letters() -> None:
    spec = spec_of(time_field="event_time")
    good = list(bodies(50))
    bulk = decode_messages(spec, _schema(spec), good, list(range(1, 51)), [0] * 50)
    assert bulk.num_rows == 50 and bulk.column("__dead_letter").null_count == 50
    # One misfit sends the batch down the message-by-message path: same rows, one letter.
    mixed = [*good, b'{"event_id": 1}', b"not json", json.dumps(
        {**json.loads(good[0]), "event_id": "7", "event_time": "2026-01-02T03:04:05"}).encode()]
    slow = decode_messages(spec, _schema(spec), mixed, list(range(1, 54)), [0] * 53)
    assert slow.slice(0, 50).to_pylist() == bulk.to_pylist()
    letters = slow.column("__dead_letter").to_pylist()[50:]
    assert letters[0] == "51: missing field 'event_time'"
    assert letters[1].startswith("52: payload is not JSON")
    assert letters[2] is None and slow.column("event_id")[52].as_py() == 7


def test_without_a_time_field_rows_carry_the_stream_time() -> None:
    declared = {k: v for k, v in SCHEMA.items() if k != "event_time"}
    spec = NatsSpec.from_params("events", {"url": "nats://h:1", "streams": ["A"],
                                           "schema": declared})
    at_ns = 1_800_000_000_123_456_789
    for messages in ([b'{"event_id": 1, "campaign_id": 2, "user_id": 3, "event_type": "v"}'],
                     [b'{"event_id": 1, "campaign_id": 2, "user_id": 3, "event_type": "v"}',
                      b"[]"]):
        rows = decode_messages(spec, _schema(spec), messages, [1, 2][:len(messages)],
                               [at_ns] * len(messages)).to_pylist()
        assert rows[0]["event_time"].timestamp() == pytest.approx(at_ns / 1e9, abs=1e-6)


@pytest.fixture
def stream(service_urls: dict[str, str]) -> Iterator[tuple[str, str]]:
    url, name = service_urls["nats_url"], new_stream()
    yield url, name
    delete_streams(url, [name])


def test_planning_and_lag_on_a_real_stream(stream: tuple[str, str]) -> None:
    url, name = stream
    fill(url, name, bodies(120))
    spec = spec_of(url, (name,), start="earliest", max_entries_per_epoch=50)
    first = take_sequences(spec, None)
    assert first.start["streams"] == {name: {"seq": 0}}
    assert first.end["streams"] == {name: {"seq": 50}}
    assert nats_lags(spec, first.end) == {name: 70}
    assert take_from_json(first.to_json(), "sources.events") == first  # as the log keeps it
    second = take_sequences(spec, first)
    assert second.start == first.end and second.end["streams"][name] == {"seq": 100}


def test_a_missing_stream_fails_at_once_naming_it(stream: tuple[str, str]) -> None:
    url, name = stream
    spec = spec_of(url, (name,), reconnect_seconds=60)
    started = time.monotonic()
    with pytest.raises(UnsupportedJobError) as caught:
        take_sequences(spec, None)
    assert time.monotonic() - started < 30  # not retried for the reconnect time
    assert f"has no JetStream stream {name!r}" in str(caught.value)
    assert "events" in str(caught.value) and failure_of(caught.value).kind == "job"


def test_refused_credentials_fail_at_once_without_showing_the_password(
    stream: tuple[str, str]
) -> None:
    url, name = stream
    parts = urlsplit(url)
    wrong = urlunsplit(parts._replace(
        netloc=f"{parts.username}:not-the-password@{parts.hostname}:{parts.port}"))
    with pytest.raises(UnsupportedJobError) as caught:
        take_sequences(spec_of(wrong, (name,), reconnect_seconds=60), None)
    assert "refused the connection" in str(caught.value)
    assert "not-the-password" not in str(caught.value)


def test_an_unreachable_server_is_retried_then_fails_naming_url_and_step() -> None:
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        url = f"nats://app:pw@127.0.0.1:{closed.getsockname()[1]}"
        with pytest.raises(BrokerUnavailable) as caught:
            take_sequences(spec_of(url, reconnect_seconds=1), None)
    message = str(caught.value)
    assert "source 'events': NATS at nats://app:***@127.0.0.1:" in message
    assert "unreachable for 1 s while planning an epoch" in message and "pw@" not in message
    assert failure_of(caught.value).kind == "transient"
