"""A broker range's rows are read once, by the plan (Redis) or ahead of it (a source that is
behind), and kept for the epoch that runs it; rows read ahead serve only that very range, and
a read that failed or took less than the cap leaves the range to be read again."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
import redis

from engine.runtime.io.broker import nats_stream, redis_stream
from engine.runtime.io.broker.nats_client import NatsSpec
from engine.runtime.io.broker.read_ahead import RangeRows, ReadAhead, spark_schema
from engine.runtime.io.broker.spec import DEAD_LETTER, StreamSpec
from engine.runtime.io.taken import EntriesTaken
from tests.engine.runtime.nats_jobs import bodies, delete_streams, fill, new_stream


def test_a_failed_read_ahead_leaves_the_range_to_be_read_again() -> None:
    reads = ReadAhead("test-read-ahead")

    def unreachable() -> RangeRows:
        raise ConnectionError("broker down")

    reads.read_ahead("events", unreachable)
    assert reads.ahead("events") is None
    assert reads.ahead("events") is None  # nothing left behind


def test_kept_rows_serve_only_the_range_they_were_read_for() -> None:
    reads = ReadAhead("test-read-ahead")
    rows = pa.table({"n": [1, 2]})
    reads.keep("events", RangeRows(taken=("a", 2), rows=rows))
    assert reads.planned("events", ("a", 2)) == RangeRows(("a", 2), rows)
    assert reads.planned("events", ("a", 3)) is None
    assert reads.planned("other", ("a", 2)) is None


@pytest.mark.spark
def test_the_dead_letters_are_counted_on_the_driver_and_never_reach_spark(spark) -> None:  # type: ignore[no-untyped-def]
    spec = redis_spec("redis://h", "s", cap=10)
    rows = pa.table({"n": [1, None, 3, None], "event_time": pa.array([0] * 4, pa.timestamp("us")),
                     DEAD_LETTER: [None, "9-0: bad", None, "7-0: bad"]})
    reads = ReadAhead("test-read-ahead")
    read = reads.frame(spark, "events", ("a", 4), spark_schema(spec), lambda: rows)
    assert read.entries == 4 and read.dead_letters == {"count": 2, "sample": "7-0: bad"}
    assert read.frame.columns == ["n", "event_time"]
    assert [r.n for r in read.frame.collect()] == [1, 3]
    clean = reads.frame(spark, "events", ("a", 2), spark_schema(spec), lambda: rows.slice(0, 1))
    assert clean.dead_letters == {"count": 0, "sample": None} and clean.frame.count() == 1


@pytest.fixture
def client(service_urls: dict[str, str]) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(service_urls["redis_url"]) as found:
        yield found


@pytest.fixture
def stream(client: redis.Redis) -> Iterator[str]:
    key = f"readahead-{uuid.uuid4().hex[:8]}"
    yield key
    client.delete(key)


def redis_spec(url: str, stream: str, cap: int, **params: object) -> StreamSpec:
    return StreamSpec.from_params("events", {"url": url, "streams": [stream], "start": "earliest",
                                             "max_entries_per_epoch": cap,
                                             "schema": {"n": "long"}, **params})


def kept(spec: StreamSpec, taken: EntriesTaken) -> list[int]:
    planned = redis_stream._reads.planned(spec.key, taken)
    assert planned is not None, "the plan kept no rows for its range"
    return planned.rows.column("n").to_pylist()


def test_each_redis_plan_keeps_exactly_its_entries_behind_and_caught_up(
    client: redis.Redis, stream: str, service_urls: dict[str, str]
) -> None:
    for n in range(25):
        client.xadd(stream, {"n": n})
    spec = redis_spec(service_urls["redis_url"], stream, cap=10)
    first = redis_stream.take_entries(spec, None)
    assert kept(spec, first) == list(range(10))
    second = redis_stream.take_entries(spec, first)  # walked ahead while "the epoch ran"
    assert kept(spec, second) == list(range(10, 20))
    for n in range(25, 28):  # come after the walk ahead, which found fewer than the cap
        client.xadd(stream, {"n": n})
    third = redis_stream.take_entries(spec, second)
    assert kept(spec, third) == list(range(20, 28)) and third.count == 8
    assert redis_stream.take_entries(spec, third).count == 0
    # A range this process did not plan (a replayed epoch) is read from the stream.
    assert redis_stream._read(spec, second).column("n").to_pylist() == list(range(10, 20))


def test_a_redis_read_retried_after_a_lost_connection_keeps_no_rows_twice(
    stream: str, service_urls: dict[str, str]
) -> None:
    spec = redis_spec(service_urls["redis_url"], stream, cap=10, reconnect_seconds=5)
    chunk = [[b"1-0", [b"n", b"7"]], [b"2-0", [b"n", b"bad"]]]
    attempts: list[int] = []

    def action(_client: redis.Redis, keep: redis_stream._Keep) -> str:
        keep(chunk)
        attempts.append(1)
        if len(attempts) == 1:
            raise redis.ConnectionError("connection reset")
        return "done"

    result, rows = redis_stream._decoded(spec, "reading", action)
    assert result == "done" and len(attempts) == 2
    assert rows.column("n").to_pylist() == [7, None]
    assert rows.column(DEAD_LETTER).to_pylist()[1].startswith("2-0: field 'n'")


@pytest.fixture
def nats_stream_name(service_urls: dict[str, str]) -> Iterator[str]:
    name = new_stream()
    yield name
    delete_streams(service_urls["nats_url"], [name])


def test_a_nats_source_behind_has_its_next_range_read_ahead(
    nats_stream_name: str, service_urls: dict[str, str]
) -> None:
    url = service_urls["nats_url"]
    fill(url, nats_stream_name, bodies(25))
    spec = NatsSpec.from_params("events", {
        "url": url, "streams": [nats_stream_name], "start": "earliest",
        "max_entries_per_epoch": 10, "schema": {"event_id": "long"}})
    source = spec.key
    first = nats_stream.take_messages(spec, None)
    assert nats_stream._reads.planned(source, first) is None  # nothing read ahead of a new run
    second = nats_stream.take_messages(spec, first)
    ahead = nats_stream._reads.planned(source, second)
    assert ahead is not None and ahead.rows.equals(nats_stream._read(spec, second))
    assert ahead.rows.num_rows == 10
    third = nats_stream.take_messages(spec, second)  # 5 left: read ahead, all of them
    rows = nats_stream._reads.planned(source, third)
    assert third.count == 5 and rows is not None and rows.rows.num_rows == 5
    assert nats_stream.take_messages(spec, third).count == 0
