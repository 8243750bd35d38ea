"""Builds the streaming DataFrame of a job's sources (one query per run)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from engine.dag import JobGraph
from engine.runtime.errors import UnsupportedJobError
from engine.runtime.pipeline import SOURCE_TAG
from engine.runtime.sources import GeneratorSpec, read_files, read_generator, read_rate


def source_stream(
    spark: SparkSession, graph: JobGraph, op_id: str, start_ms: int, epoch_ms: int
) -> DataFrame:
    """The streaming DataFrame of one source operator."""
    op = graph.operator(op_id)
    if op.type == "source.generator":
        return read_generator(spark, GeneratorSpec.from_params(op.params, start_ms), epoch_ms)
    if op.type == "source.rate":
        return read_rate(spark, op.params)
    if op.type == "source.files":
        return read_files(spark, op.params)
    raise UnsupportedJobError(f"source {op_id!r}: type {op.type!r} is not supported")


def job_stream(spark: SparkSession, graph: JobGraph, start_ms: int, epoch_ms: int) -> DataFrame:
    """All sources as one stream; with several, rows carry their source's id in a tag
    column so one micro-batch (one epoch) covers every source."""
    sources = list(graph.sources())
    if len(sources) == 1:
        return source_stream(spark, graph, sources[0], start_ms, epoch_ms)
    frames = [
        source_stream(spark, graph, s, start_ms, epoch_ms).withColumn(SOURCE_TAG, F.lit(s))
        for s in sources
    ]
    combined = frames[0]
    for other in frames[1:]:
        combined = combined.unionByName(other, allowMissingColumns=True)
    return combined
