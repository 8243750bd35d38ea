"""Offsets of a Redis Streams source: where an epoch starts and ends in each stream.

An offset is ``{"op": <source id>, "streams": {<stream>: {"id": <last entry id read>,
"n": <entries up to it>}}}``. The epoch's logged plan keeps it (``taken.EntriesTaken``), so
a replayed epoch reads exactly the entries in ``(start id, end id]`` again (entries the
stream trimmed away meanwhile are gone for the replay too). The lag behind the tail is
``XLEN - n`` when that is ``LAG_EXACT_LIMIT`` or more (a lower bound, exact while the stream
is not trimmed), else counted exactly.

Entries are walked with plain ``XRANGE`` replies as the server sends them, not in a script:
a script's ``XRANGE`` turns every field of every entry into a Lua value, which costs the
single-threaded server several times what sending the reply does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import redis

from engine.runtime.io.broker.spec import StreamSpec, retried_while_unreachable
from engine.runtime.io.taken import Offset

T = TypeVar("T")
# Entries one XRANGE call walks: the server runs one command at a time, so a call must
# stay short for the other clients of a shared server.
READ_CHUNK = 10_000
# The lag is counted exactly below this many entries; from it on, the stream's length less
# the entries before the offset is the lag (exact unless the stream was trimmed since, and
# never above it), so a lag of millions costs one call per epoch, not hundreds.
LAG_EXACT_LIMIT = READ_CHUNK


def with_reconnect(spec: StreamSpec, step: str, action: Callable[[redis.Redis], T]) -> T:
    """Runs ``action`` on a fresh client, retrying while the broker is unreachable (it may
    be restarting) for up to ``spec.reconnect_s``; then fails naming source, URL and step."""

    def attempt() -> T:
        with redis.Redis.from_url(spec.url, socket_timeout=10) as client:
            return action(client)

    return retried_while_unreachable(
        spec, step, attempt, broker="Redis",
        unreachable=(redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError))


def initial_offset(client: redis.Redis, spec: StreamSpec) -> Offset:
    """Where a new run starts: before the first entry, at the tail, or after given ids."""
    streams = {}
    for stream in spec.streams:
        length = _length(client, stream)
        if spec.start == "earliest":
            streams[stream] = {"id": "0-0", "n": 0}
        elif spec.start == "latest":
            streams[stream] = {"id": _last_id(client, stream), "n": length}
        else:
            given = spec.start[stream] if isinstance(spec.start, dict) else "0-0"
            later = walk_stream(client, stream, given, None)[0]  # entries after ``given``
            streams[stream] = {"id": given, "n": length - later}
    return {"op": spec.op_id, "streams": streams}


def advance(client: redis.Redis, spec: StreamSpec, start: Offset, cap: int | None,
            on_chunk: Callable[[list[Any]], None] | None = None) -> Offset:
    """The end offset of the next epoch: every new entry, or at most ``cap`` in all,
    shared between the streams (a stream's unused share goes to the next ones).
    ``on_chunk`` is handed each chunk of entries walked, oldest first: the epoch's entries."""
    streams = {}
    budget = cap
    for index, stream in enumerate(spec.streams):
        position = start["streams"].get(stream) or {"id": "0-0", "n": 0}
        share = None if budget is None else -(-budget // (len(spec.streams) - index))
        count, last = walk_stream(client, stream, position["id"], share, on_chunk)
        streams[stream] = {"id": last or position["id"], "n": position["n"] + count}
        if budget is not None:
            budget -= count
    return {"op": spec.op_id, "streams": streams}


def walk_stream(client: redis.Redis, stream: str, after: str, share: int | None,
                on_chunk: Callable[[list[Any]], None] | None = None,
                until: str = "+") -> tuple[int, str]:
    """Entries of ``stream`` in ``(after, until]`` (at most ``share``) and the last one's id;
    ``on_chunk`` is handed each chunk of them, oldest first."""
    total, last = 0, ""
    while share is None or total < share:
        chunk = READ_CHUNK if share is None else min(READ_CHUNK, share - total)
        entries = read_chunk(client, stream, last or after, until, count=chunk)
        if not entries:
            break
        if on_chunk is not None:
            on_chunk(entries)
        total += len(entries)
        last = entries[-1][0].decode()
        if len(entries) < chunk:
            break
    return total, last


def read_chunk(client: redis.Redis, stream: str, after: str, until: str,
               count: int = READ_CHUNK) -> list[Any]:
    """Up to ``count`` entries of ``stream`` with ids in ``(after, until]``, oldest first, as
    the server sends them: ``[id, [name, value, name, value...]]``, nothing decoded (the
    reader decodes a whole chunk at once)."""
    client.set_response_callback("XRANGE", _as_sent)
    entries: Any = client.xrange(stream, f"({after}", until, count=count)
    return list(entries)


def _as_sent(response: Any, **_options: Any) -> Any:
    return response


def stream_lags(client: redis.Redis, offset: Offset) -> dict[str, int]:
    """Entries behind each stream's tail after ``offset`` (0 once caught up)."""
    lags = {}
    for stream, position in offset["streams"].items():
        at_least = _length(client, stream) - int(position["n"])  # fewer if trimmed, never more
        if at_least >= LAG_EXACT_LIMIT:
            lags[stream] = at_least
        else:
            lags[stream] = walk_stream(client, stream, position["id"], LAG_EXACT_LIMIT)[0]
            if lags[stream] >= LAG_EXACT_LIMIT:
                lags[stream] = max(lags[stream], at_least)
    return lags


def _last_id(client: redis.Redis, stream: str) -> str:
    newest: Any = client.xrevrange(stream, "+", "-", count=1)
    return newest[0][0].decode() if newest else "0-0"


def _length(client: redis.Redis, stream: str) -> int:
    reply: Any = client.xlen(stream)
    return int(reply)
