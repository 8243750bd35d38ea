"""Every source's rows of one epoch, from what the epoch's plan took of it: a clock source's
row-id range, a directory's files, a broker's offset range. The planner takes (``take``),
the epoch reads (``source_rows``): a replayed epoch reads exactly what its plan took."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from pyspark.sql import DataFrame, SparkSession

from engine.dag import CLOCK_SOURCES, JobGraph
from engine.runtime.errors import MalformedPlan, UnsupportedJobError
from engine.runtime.io.broker.nats_client import NatsSpec
from engine.runtime.io.broker.nats_stream import nats_rows, take_messages
from engine.runtime.io.broker.read_ahead import BrokerRows
from engine.runtime.io.broker.redis_stream import stream_rows, take_entries
from engine.runtime.io.broker.spec import StreamSpec
from engine.runtime.io.source_load import ClockSource
from engine.runtime.io.sources import (
    GeneratorSpec,
    file_rows,
    generator_rows,
    new_files,
    rate_rows,
)
from engine.runtime.io.taken import (
    ClockRange,
    EntriesTaken,
    FilesTaken,
    SequencesTaken,
    SourceTake,
)


def take(graph: JobGraph, op_id: str, previous: SourceTake | None, clock: ClockSource | None,
         now_ms: float, files_taken: Collection[str],
         spark: SparkSession | None = None) -> SourceTake:
    """What the next epoch takes of source ``op_id``, as logged in its plan; ``previous`` is
    what the epoch before took (None: none). A broker source behind reads its next range
    ahead, handed to ``spark`` if given."""
    op = graph.operator(op_id)
    if clock is not None:
        first = previous.end if isinstance(previous, ClockRange) else 0
        return ClockRange(*clock.take(first, now_ms))
    if op.type == "source.files":
        return FilesTaken(tuple(new_files(op.params, files_taken)))
    if op.type == "source.redis_stream":
        return take_entries(StreamSpec.from_params(op_id, op.params),
                            previous if isinstance(previous, EntriesTaken) else None, spark)
    if op.type == "source.nats":
        return take_messages(NatsSpec.from_params(op_id, op.params),
                             previous if isinstance(previous, SequencesTaken) else None, spark)
    raise UnsupportedJobError(f"source {op_id!r}: type {op.type!r} is not supported")


def source_rows(
    spark: SparkSession,
    graph: JobGraph,
    start_ms: int,
    taken: Mapping[str, SourceTake],
    partitions: Mapping[str, int],
) -> dict[str, DataFrame | BrokerRows]:
    """Each source's rows of one epoch, as its plan ``taken`` says; a clock source's over
    its parallelism."""
    frames: dict[str, DataFrame | BrokerRows] = {}
    for op_id, part in taken.items():
        op = graph.operator(op_id)
        if isinstance(part, ClockRange) and op.type == "source.generator":
            spec = GeneratorSpec.from_params(op.params, start_ms)
            frames[op_id] = generator_rows(spark, spec, part.first, part.end, partitions[op_id])
        elif isinstance(part, ClockRange) and op.type == "source.rate":
            frames[op_id] = rate_rows(spark, op.params, start_ms, part.first, part.end,
                                      partitions[op_id])
        elif isinstance(part, FilesTaken) and op.type == "source.files":
            frames[op_id] = file_rows(spark, op.params, list(part.files))
        elif isinstance(part, SequencesTaken) and op.type == "source.nats":
            frames[op_id] = nats_rows(spark, NatsSpec.from_params(op_id, op.params), part)
        elif isinstance(part, EntriesTaken) and op.type == "source.redis_stream":
            frames[op_id] = stream_rows(spark, StreamSpec.from_params(op_id, op.params), part)
        else:
            raise MalformedPlan(f"sources.{op_id}: a {op.type} does not take {part!r:.200}")
    return frames


def nothing_taken(graph: JobGraph, op_id: str) -> SourceTake:
    """What an epoch that takes nothing of source ``op_id`` logs: read, it gives no rows,
    in the source's columns (the shapes a logic change is checked against)."""
    op = graph.operator(op_id)
    if op.type in CLOCK_SOURCES:
        return ClockRange(0, 0)
    if op.type == "source.files":
        return FilesTaken(())
    return EntriesTaken({"streams": {}}, {"streams": {}})
