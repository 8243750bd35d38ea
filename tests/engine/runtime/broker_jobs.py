"""Redis streams for the broker-source tests: entries written with known event times,
the job that reads them into a keyed window aggregate, and the windows a batch read of
the same entries gives (computed here in plain Python, not by the runtime)."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import redis

BASE_MS = 1_800_000_000_000  # a multiple of the window: windows start at BASE_MS + k * WINDOW
WINDOW_MS = 5000
TAIL_MS = BASE_MS + 3_600_000  # the tail's event time closes every window before it
STEP_MS = 5
CAMPAIGNS = 40
SCHEMA = {"event_id": "long", "event_time": "timestamp", "campaign_id": "long",
          "user_id": "long", "event_type": "string"}


def event_fields(i: int, at_ms: int | None = None) -> dict[str, str]:
    """Entry ``i``: campaign ``i*7 mod CAMPAIGNS``, event time ``BASE_MS + i*STEP_MS``."""
    at = BASE_MS + i * STEP_MS if at_ms is None else at_ms
    return {"event_id": str(i), "event_time": str(at),
            "campaign_id": str(i * 7 % CAMPAIGNS), "user_id": str(i % 997), "event_type": "view"}


def fill_stream(
    client: redis.Redis, stream: str, first: int, count: int, malformed_every: int = 0
) -> int:
    """Writes events ``first..first+count-1`` (with a malformed entry after every
    ``malformed_every``); returns how many entries were written."""
    written = 0
    with client.pipeline(transaction=False) as pipe:
        for i in range(first, first + count):
            pipe.xadd(stream, event_fields(i))  # type: ignore[arg-type]
            written += 1
            if malformed_every and i % malformed_every == malformed_every - 1:
                pipe.xadd(stream, {**event_fields(i), "event_time": "not a time"})
                written += 1
        pipe.execute()
    return written


def write_tail(client: redis.Redis, stream: str, cap: int) -> int:
    """Two epochs' worth of entries far ahead in event time: their watermark closes every
    window of the events before them in the run's last epoch."""
    with client.pipeline(transaction=False) as pipe:
        for i in range(2 * cap):
            pipe.xadd(stream, event_fields(10**9 + i, at_ms=TAIL_MS))  # type: ignore[arg-type]
        pipe.execute()
    return 2 * cap


def last_epoch_for(entries: int, cap: int) -> int:
    """The epoch that reads the last of ``entries`` entries already in the stream."""
    return math.ceil(entries / cap) - 1


def fill_for_run(
    client: redis.Redis, streams: list[str], count: int, cap: int, malformed_every: int = 0
) -> tuple[int, int]:
    """Each of ``streams`` gets events ``0..count-1`` (see ``fill_stream``) and its share of
    a tail that closes every window (``write_tail``) for a run reading ``cap`` entries an
    epoch; returns (entries written, the epoch that reads the last of them)."""
    total = 0
    for stream in streams:
        total += fill_stream(client, stream, 0, count, malformed_every=malformed_every)
        total += write_tail(client, stream, cap // len(streams))
    return total, last_epoch_for(total, cap)


def stream_job(url: str, streams: list[str], cap: int, sink: dict[str, Any],
               parallelism: int = 2) -> dict[str, Any]:
    """source.redis_stream -> window_aggregate (campaign, 5 s windows) -> sink."""
    return {
        "name": "stream-test",
        "key_groups": 16,
        "operators": [
            {"id": "events", "type": "source.redis_stream",
             "params": {"url": url, "streams": streams, "start": "earliest",
                        "max_entries_per_epoch": cap, "schema": SCHEMA,
                        "time_field": "event_time", "reconnect_seconds": 20}},
            {"id": "counts", "type": "window_aggregate", "parallelism": parallelism,
             "params": {"key": ["campaign_id"], "time": "event_time", "window": "5 seconds",
                        "watermark": "1 second",
                        "aggregates": {"n": "count(*)", "users": "sum(user_id)"}}},
            {"id": "out", **sink},
        ],
        "edges": [{"from": "events", "to": "counts"}, {"from": "counts", "to": "out"}],
    }


def batch_windows(client: redis.Redis, streams: list[str]) -> dict[tuple[int, int], tuple]:
    """Windows (campaign, start ms) -> (n, sum of users) over a batch read (XRANGE) of the
    streams' well-formed entries before the tail."""
    windows: dict[tuple[int, int], list[int]] = {}
    for stream in streams:
        for _, fields in client.xrange(stream):  # type: ignore[union-attr]
            at = fields[b"event_time"].decode()
            if not at.isdigit() or int(at) >= TAIL_MS:
                continue
            start = int(at) - int(at) % WINDOW_MS
            key = (int(fields[b"campaign_id"]), start)
            found = windows.setdefault(key, [0, 0])
            found[0] += 1
            found[1] += int(fields[b"user_id"])
    return {k: tuple(v) for k, v in windows.items()}


def sink_windows(table: pa.Table | None) -> dict[tuple[int, int], tuple]:
    """The sink's windows before the tail, keyed like ``batch_windows``; a window emitted
    twice fails the test."""
    found: dict[tuple[int, int], tuple] = {}
    if table is None:
        return found
    starts = pc.cast(table["window_start"], pa.int64()).to_pylist()  # micros
    for start_us, row in zip(starts, table.to_pylist(), strict=True):
        key = (row["campaign_id"], start_us // 1000)
        if key[1] >= TAIL_MS:
            continue
        assert key not in found, f"window emitted twice: {key}"
        found[key] = (row["n"], row["users"])
    return found
