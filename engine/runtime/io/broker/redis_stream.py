"""``source.redis_stream``: the entries an epoch reads, fixed in its plan, read as a batch.

The driver plans each epoch's entries as an offset range per stream (``take_entries``): the
range is logged with the epoch's plan before the epoch runs, so a replayed epoch reads the
same entries. Redis cannot say where the next N entries end without sending them, so the
planner keeps what it walked: it decodes the entries in bulk into Arrow as they come, and
the epoch hands that table to Spark. Each entry crosses from Redis once per epoch, not once
to plan and once more to read.

A source that is behind has its next range walked ahead (``read_ahead``); one that has
caught up is walked when its next epoch is planned, to take every new entry. A range the
planner did not walk in this process (a replayed epoch after a restart) is read when the
epoch runs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pyarrow as pa
import redis
from pyspark.sql import SparkSession

from engine.runtime.io.broker import read_ahead
from engine.runtime.io.broker.columnar import arrow_schema, entries_batch
from engine.runtime.io.broker.read_ahead import RangeRows, ReadAhead, range_rows, spark_schema
from engine.runtime.io.broker.redis_offsets import (
    advance,
    initial_offset,
    walk_stream,
    with_reconnect,
)
from engine.runtime.io.broker.spec import StreamSpec
from engine.runtime.io.taken import EntriesTaken, Offset

_Keep = Callable[[list[Any]], None]  # takes a chunk of entries as the server sent them
_reads = ReadAhead("redis-read-ahead")


def take_entries(spec: StreamSpec, previous: EntriesTaken | None,
                 spark: SparkSession | None = None) -> EntriesTaken:
    """The entries the next epoch reads: from where the previous epoch ended (a new run:
    the source's ``start``) up to every new entry, at most ``max_entries_per_epoch`` in all.
    With ``spark``, rows walked ahead are handed to it ahead too."""
    if previous is None:
        start = with_reconnect(spec, "finding the start offsets",
                               lambda c: initial_offset(c, spec))
    else:
        start = previous.end
    ahead = _reads.ahead(spec.key)
    # Walked ahead to the cap: nothing newer could be taken. Short of it, entries may have
    # come since, which this epoch takes.
    full = ahead is not None and ahead.taken.start == start \
        and ahead.taken.count >= spec.max_entries
    walked = ahead if full and ahead is not None else _walk(spec, start)
    _reads.keep(spec.key, walked)
    if walked.taken.count >= spec.max_entries:
        _reads.read_ahead(spec.key, partial(_walk, spec, walked.taken.end, spark))
    return walked.taken


def stream_rows(spark: SparkSession, spec: StreamSpec,
                taken: EntriesTaken) -> read_ahead.BrokerRows:
    """The rows of an epoch's entries: those the plan walked, else (a range planned by
    another process) read now."""
    return _reads.frame(spark, spec.key, taken, spark_schema(spec), partial(_read, spec, taken))


def _walk(spec: StreamSpec, start: Offset, spark: SparkSession | None = None) -> RangeRows:
    """The range from ``start`` up to the cap, and its entries' rows (handed to ``spark``
    if given)."""

    def walk(client: redis.Redis, keep: _Keep) -> Offset:
        return advance(client, spec, start, spec.max_entries, keep)

    end, rows = _decoded(spec, "planning an epoch", walk)
    return range_rows(EntriesTaken(start, end), rows, spark, partial(spark_schema, spec))


def _read(spec: StreamSpec, taken: EntriesTaken) -> pa.Table:
    """The rows of a range planned elsewhere: each stream's entries in (start, end]."""

    def read(client: redis.Redis, keep: _Keep) -> None:
        for stream, end in taken.end["streams"].items():
            start = taken.start["streams"].get(stream, {"id": "0-0"})["id"]
            if start != end["id"]:
                walk_stream(client, stream, start, None, keep, until=end["id"])

    return _decoded(spec, "reading an epoch's entries", read)[1]


def _decoded(spec: StreamSpec, step: str,
             action: Callable[[redis.Redis, _Keep], Any]) -> tuple[Any, pa.Table]:
    """What ``action`` returns and the rows of the chunks of entries it kept, each decoded
    as it came; a retry (the broker restarting) starts again from no rows."""
    schema = arrow_schema(spec)
    batches: list[pa.RecordBatch] = []

    def keep(entries: list[Any]) -> None:
        batches.append(entries_batch(spec, entries, schema))

    def attempt(client: redis.Redis) -> Any:
        batches.clear()
        return action(client, keep)

    result = with_reconnect(spec, step, attempt)
    return result, pa.Table.from_batches(batches, schema)
