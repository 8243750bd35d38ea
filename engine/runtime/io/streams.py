"""Builds the streaming DataFrame of a job's sources (one query per run) and, per epoch,
the rows of its clock sources from the epoch's plan."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from engine.dag import CLOCK_SOURCES, JobGraph
from engine.runtime.errors import UnsupportedJobError
from engine.runtime.io.broker.redis_stream import read_redis_stream
from engine.runtime.io.epoch_clock import read_epoch_clock
from engine.runtime.io.sources import (
    GeneratorSpec,
    generator_rows,
    rate_rows,
    read_files,
)
from engine.runtime.spark.frames import SOURCE_TAG


def clock_sources(graph: JobGraph) -> list[str]:
    """The graph's clock sources, in document order."""
    return [s for s in graph.sources() if graph.operator(s).type in CLOCK_SOURCES]


def source_stream(spark: SparkSession, graph: JobGraph, op_id: str) -> DataFrame:
    """The streaming DataFrame of one source operator read by Spark."""
    op = graph.operator(op_id)
    if op.type == "source.files":
        return read_files(spark, op.params)
    if op.type == "source.redis_stream":
        return read_redis_stream(spark, op_id, dict(op.params))
    raise UnsupportedJobError(f"source {op_id!r}: type {op.type!r} is not supported")


def paced_by_clock(graph: JobGraph) -> bool:
    """Whether the run's epochs are started by the driver's own loop: every source is a
    clock source (otherwise a Spark query's trigger paces the sources Spark reads)."""
    return bool(graph.sources()) and len(clock_sources(graph)) == len(graph.sources())


def job_stream(spark: SparkSession, graph: JobGraph) -> DataFrame:
    """The run's one stream: Spark-read sources, plus the epoch clock when the graph has
    clock sources (``engine.runtime.io.epoch_clock``); with several parts, rows carry their
    source's id in a tag column so one micro-batch (one epoch) covers every source."""
    read = [s for s in graph.sources() if s not in clock_sources(graph)]
    if not clock_sources(graph) and len(read) == 1:
        return source_stream(spark, graph, read[0])
    frames = [read_epoch_clock(spark).withColumn(
        SOURCE_TAG, F.lit(None).cast("string"))] if clock_sources(graph) else []
    frames += [source_stream(spark, graph, s).withColumn(SOURCE_TAG, F.lit(s)) for s in read]
    combined = frames[0]
    for other in frames[1:]:
        combined = combined.unionByName(other, allowMissingColumns=True)
    return combined


def clock_source_rows(
    spark: SparkSession,
    graph: JobGraph,
    start_ms: int,
    ranges: Mapping[str, list[int]],
    partitions: Mapping[str, int],
) -> dict[str, DataFrame]:
    """Each clock source's rows of one epoch: its planned id range over its parallelism."""
    frames: dict[str, DataFrame] = {}
    for op_id, (first, end) in ranges.items():
        op = graph.operator(op_id)
        if op.type == "source.generator":
            spec = GeneratorSpec.from_params(op.params, start_ms)
            frames[op_id] = generator_rows(spark, spec, first, end, partitions[op_id])
        else:
            frames[op_id] = rate_rows(spark, op.params, start_ms, first, end, partitions[op_id])
    return frames
