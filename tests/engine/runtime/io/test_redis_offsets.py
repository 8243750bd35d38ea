"""Offsets of the Redis stream source on the embedded Redis: start positions, the cap
shared between streams, the range an epoch reads, and the lag behind the tail."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from engine.runtime.io.broker import redis_offsets
from engine.runtime.io.broker.redis_offsets import (
    advance,
    initial_offset,
    read_chunk,
    stream_lags,
    with_reconnect,
)
from engine.runtime.io.broker.spec import BrokerUnavailable, StreamSpec


@pytest.fixture
def client(service_urls: dict[str, str]) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(service_urls["redis_url"]) as found:
        yield found


@pytest.fixture
def streams(client: redis.Redis) -> Iterator[list[str]]:
    keys = [f"sstest-{uuid.uuid4().hex[:8]}:{n}" for n in ("a", "b")]
    yield keys
    client.delete(*keys)


def spec_of(streams: list[str], start: object = "earliest", url: str = "redis://x") -> StreamSpec:
    return StreamSpec.from_params("src", {"url": url, "streams": streams, "start": start,
                                          "schema": {"n": "long"}})


def fill(client: redis.Redis, stream: str, first: int, count: int) -> list[str]:
    return [client.xadd(stream, {"n": i}).decode() for i in range(first, first + count)]


def test_start_positions(client: redis.Redis, streams: list[str]) -> None:
    ids = fill(client, streams[0], 0, 10)
    earliest = initial_offset(client, spec_of(streams))
    assert earliest["streams"] == {s: {"id": "0-0", "n": 0} for s in streams}
    latest = initial_offset(client, spec_of(streams, "latest"))
    assert latest["streams"][streams[0]] == {"id": ids[-1], "n": 10}
    assert latest["streams"][streams[1]] == {"id": "0-0", "n": 0}  # no stream yet
    given = initial_offset(client, spec_of(streams, {streams[0]: ids[3], streams[1]: "0-0"}))
    assert given["streams"][streams[0]] == {"id": ids[3], "n": 4}
    assert stream_lags(client, given) == {streams[0]: 6, streams[1]: 0}


def test_the_cap_is_shared_and_an_epoch_reads_exactly_its_range(
    client: redis.Redis, streams: list[str]
) -> None:
    a_ids = fill(client, streams[0], 0, 3)
    b_ids = fill(client, streams[1], 100, 50)
    spec = spec_of(streams)
    start = initial_offset(client, spec)
    end = advance(client, spec, start, cap=20)  # a has only 3: b gets the rest of the cap
    assert end["streams"] == {streams[0]: {"id": a_ids[-1], "n": 3},
                              streams[1]: {"id": b_ids[16], "n": 17}}
    until = end["streams"][streams[1]]["id"]
    first = read_chunk(client, streams[1], "0-0", until, count=10)
    rest = read_chunk(client, streams[1], first[-1][0].decode(), until, count=10)
    read = [int(dict(zip(f[0::2], f[1::2], strict=True))[b"n"]) for _, f in first + rest]
    assert read == list(range(100, 117))
    assert stream_lags(client, end) == {streams[0]: 0, streams[1]: 33}
    fill(client, streams[0], 3, 2)  # new entries after the end are the next epoch's
    after = advance(client, spec, end, cap=None)
    assert after["streams"][streams[0]]["n"] == 5 and after["streams"][streams[1]]["n"] == 50
    assert stream_lags(client, after) == {streams[0]: 0, streams[1]: 0}
    assert advance(client, spec, after, cap=10) == after  # nothing new: the same offset


def test_an_unreachable_broker_fails_after_the_reconnect_time_with_the_url_masked() -> None:
    spec = StreamSpec.from_params("src", {"url": "redis://:pw@127.0.0.1:1/0", "streams": ["s"],
                                          "schema": {"n": "long"}, "reconnect_seconds": 0.5})
    with pytest.raises(BrokerUnavailable) as caught:
        with_reconnect(spec, "planning an epoch", lambda c: c.ping())
    message = str(caught.value)
    assert message.startswith("source 'src': Redis at redis://:***@127.0.0.1:1/0 unreachable "
                              "for 0.5 s while planning an epoch")
    assert "pw" not in message.replace("***", "")


def test_lag_stays_exact_when_the_producer_trims_the_stream(
    client: redis.Redis, streams: list[str]
) -> None:
    fill(client, streams[0], 0, 100)
    spec = spec_of(streams[:1])
    end = advance(client, spec, initial_offset(client, spec), cap=30)
    client.xtrim(streams[0], maxlen=50, approximate=False)  # the 30 read and 20 unread gone
    assert stream_lags(client, end) == {streams[0]: 50}


def test_an_epoch_spanning_several_reads_and_a_lag_past_the_exact_limit(
    client: redis.Redis, streams: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_offsets, "READ_CHUNK", 7)
    monkeypatch.setattr(redis_offsets, "LAG_EXACT_LIMIT", 20)
    ids = fill(client, streams[0], 0, 100)
    spec = spec_of(streams[:1])
    end = advance(client, spec, initial_offset(client, spec), cap=30)
    assert end["streams"][streams[0]] == {"id": ids[29], "n": 30}
    assert stream_lags(client, end) == {streams[0]: 70}  # from the length, no walk
    near = advance(client, spec, end, cap=65)
    assert stream_lags(client, near) == {streams[0]: 5}  # counted
    client.xtrim(streams[0], maxlen=50, approximate=False)  # 20 unread gone: a lower bound
    assert stream_lags(client, end) == {streams[0]: 20}
