"""Every source's rows of one epoch, from what the epoch's plan took of it: a clock source's
row-id range, a directory's files, a broker's offset range. The planner takes (``take``),
the epoch reads (``source_rows``): a replayed epoch reads exactly what its plan took."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from engine.dag import CLOCK_SOURCES, JobGraph
from engine.runtime.errors import UnsupportedJobError
from engine.runtime.io.broker.nats_client import NatsSpec
from engine.runtime.io.broker.nats_offsets import sequences_taken, take_sequences
from engine.runtime.io.broker.nats_stream import nats_rows
from engine.runtime.io.broker.redis_stream import entries_taken, stream_rows, take_entries
from engine.runtime.io.broker.spec import StreamSpec
from engine.runtime.io.source_load import ClockSource
from engine.runtime.io.sources import (
    GeneratorSpec,
    file_rows,
    generator_rows,
    new_files,
    rate_rows,
)


def take(graph: JobGraph, op_id: str, previous: Any, clock: ClockSource | None,
         now_ms: float, files_taken: Collection[str]) -> Any:
    """What the next epoch takes of source ``op_id``, as logged in its plan: ``[first,
    end)`` row ids of a clock source, ``{"files": [...]}`` of a directory, ``{"start",
    "end"}`` offsets of a broker; ``previous`` is what the epoch before took (None: none)."""
    op = graph.operator(op_id)
    if clock is not None:
        first = previous[1] if previous is not None else 0
        return list(clock.take(first, now_ms))
    if op.type == "source.files":
        return {"files": new_files(op.params, files_taken)}
    if op.type == "source.redis_stream":
        return take_entries(StreamSpec.from_params(op_id, op.params), previous)
    if op.type == "source.nats":
        return take_sequences(NatsSpec.from_params(op_id, op.params), previous)
    raise UnsupportedJobError(f"source {op_id!r}: type {op.type!r} is not supported")


def taken_count(graph: JobGraph, op_id: str, taken: Any) -> int:
    """Rows, files or entries an epoch's plan took of source ``op_id``."""
    op = graph.operator(op_id)
    if op.type in CLOCK_SOURCES:
        return int(taken[1]) - int(taken[0])
    if op.type == "source.files":
        return len(taken["files"])
    if op.type == "source.nats":
        return sequences_taken(taken)
    return entries_taken(taken)


def source_rows(
    spark: SparkSession,
    graph: JobGraph,
    start_ms: int,
    taken: Mapping[str, Any],
    partitions: Mapping[str, int],
) -> dict[str, DataFrame]:
    """Each source's rows of one epoch, as its plan ``taken`` says; a clock source's over
    its parallelism."""
    frames: dict[str, DataFrame] = {}
    for op_id, part in taken.items():
        op = graph.operator(op_id)
        if op.type == "source.generator":
            spec = GeneratorSpec.from_params(op.params, start_ms)
            frames[op_id] = generator_rows(spark, spec, part[0], part[1], partitions[op_id])
        elif op.type == "source.rate":
            frames[op_id] = rate_rows(spark, op.params, start_ms, part[0], part[1],
                                      partitions[op_id])
        elif op.type == "source.files":
            frames[op_id] = file_rows(spark, op.params, part["files"])
        elif op.type == "source.nats":
            frames[op_id] = nats_rows(spark, NatsSpec.from_params(op_id, op.params), part)
        else:
            frames[op_id] = stream_rows(spark, StreamSpec.from_params(op_id, op.params), part)
    return frames


def nothing_taken(graph: JobGraph, op_id: str) -> Any:
    """What an epoch that takes nothing of source ``op_id`` logs: read, it gives no rows,
    in the source's columns (the shapes a logic change is checked against)."""
    op = graph.operator(op_id)
    if op.type in CLOCK_SOURCES:
        return [0, 0]
    if op.type == "source.files":
        return {"files": []}
    return {"start": {"streams": {}}, "end": {"streams": {}}}
