"""JetStream streams for the ``source.nats`` tests: the same events, job and expected
windows as the Redis tests (``broker_jobs``), written as JSON messages."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

import nats
from nats.js.errors import NotFoundError

from engine.runtime.io.broker.nats_producer import ensure_stream, publish_all
from tests.engine.runtime.broker_jobs import (
    SCHEMA,
    TAIL_MS,
    WINDOW_MS,
    event_fields,
    last_epoch_for,
    stream_job,
)
from tests.webapp.support import run_alone


def new_stream() -> str:
    """A fresh JetStream stream name (its subject is ``<name>.events``)."""
    return f"SSTEST_{uuid.uuid4().hex[:8]}"


def event(i: int, at_ms: int | None = None) -> dict[str, Any]:
    """Event ``i`` of ``broker_jobs.event_fields`` as JSON values (numbers as numbers)."""
    fields = event_fields(i, at_ms)
    return {name: fields[name] if kind == "string" else int(fields[name])
            for name, kind in SCHEMA.items()}


def bodies(count: int, malformed_every: int = 0, tail: int = 0) -> Iterator[bytes]:
    """Events ``0..count-1`` (a malformed one after every ``malformed_every``), then
    ``tail`` events far ahead in event time that close every window before them."""
    for i in range(count):
        yield json.dumps(event(i)).encode()
        if malformed_every and i % malformed_every == malformed_every - 1:
            yield json.dumps({**event(i), "event_time": "not a time"}).encode()
    for i in range(tail):
        yield json.dumps(event(10**9 + i, at_ms=TAIL_MS)).encode()


def fill(url: str, stream: str, messages: Iterator[bytes]) -> int:
    """Creates ``stream`` if needed and writes ``messages`` to it; how many."""

    async def write() -> int:
        client = await nats.connect(url)
        try:
            await ensure_stream(client, stream, [f"{stream}.>"])
            return await publish_all(client, f"{stream}.events", messages)
        finally:
            await client.close()

    return run_alone(write())


def fill_for_run(url: str, streams: list[str], count: int, cap: int,
                 malformed_every: int = 0) -> tuple[int, int]:
    """Each stream gets events ``0..count-1`` and its share of a closing tail; returns
    (messages written, the epoch that reads the last of them) for ``cap`` an epoch."""
    total = 0
    for stream in streams:
        total += fill(url, stream, bodies(count, malformed_every, tail=2 * cap // len(streams)))
    return total, last_epoch_for(total, cap)


def expected_windows(streams: int, count: int) -> dict[tuple[int, int], tuple]:
    """Windows (campaign, start ms) -> (n, sum of users) of ``streams`` streams each holding
    events ``0..count-1``: computed from the events, not read back."""
    windows: dict[tuple[int, int], list[int]] = {}
    for _ in range(streams):
        for i in range(count):
            found = event(i)
            start = found["event_time"] - found["event_time"] % WINDOW_MS
            window = windows.setdefault((found["campaign_id"], start), [0, 0])
            window[0] += 1
            window[1] += found["user_id"]
    return {k: tuple(v) for k, v in windows.items()}


def nats_job(url: str, streams: list[str], cap: int, sink: dict[str, Any],
             parallelism: int = 2) -> dict[str, Any]:
    """``broker_jobs.stream_job`` reading ``source.nats``."""
    job = stream_job(url, streams, cap, sink, parallelism)
    params = job["operators"][0]["params"]
    job["operators"][0] = {"id": "events", "type": "source.nats", "params": {
        "url": url, "streams": streams, "start": "earliest", "max_entries_per_epoch": cap,
        "schema": params["schema"], "time_field": "event_time", "reconnect_seconds": 20}}
    return job


def delete_streams(url: str, streams: list[str]) -> None:
    """Removes the test's streams."""

    async def delete() -> None:
        client = await nats.connect(url)
        try:
            js = client.jetstream()
            for stream in streams:
                with contextlib.suppress(NotFoundError):  # never written
                    await js.delete_stream(stream)
        finally:
            await client.close()

    run_alone(delete())
