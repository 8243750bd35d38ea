"""An epoch's rows between operators: a Spark DataFrame (what the VSN stages emit stays
one, on the executors), or an Arrow table where rows are already local, converted only
when needed."""

from __future__ import annotations

from typing import Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

Frame = Union[DataFrame, pa.Table]  # noqa: UP007  # a runtime alias, not an annotation

SOURCE_TAG = "__source"
"""The column that names each row's source in a run's one stream of several sources."""


def to_spark(spark: SparkSession, frame: Frame) -> DataFrame:
    """The frame as a DataFrame."""
    return frame if isinstance(frame, DataFrame) else spark.createDataFrame(frame)


def to_arrow(frame: Frame) -> pa.Table:
    """The frame as an Arrow table (collects a DataFrame)."""
    return frame if isinstance(frame, pa.Table) else frame.toArrow()


def union(spark: SparkSession, frames: list[Frame]) -> Frame:
    """Union by column name (Arrow stays Arrow when every input is Arrow)."""
    if all(isinstance(f, pa.Table) for f in frames):
        return pa.concat_tables(frames, promote_options="default")  # type: ignore[arg-type]
    combined = to_spark(spark, frames[0])
    for other in frames[1:]:
        combined = combined.unionByName(to_spark(spark, other))
    return combined


def time_quantiles(frame: Frame, column: str) -> tuple[float, float, float] | None:
    """(median, 1st percentile, minimum) of a timestamp column, in epoch micros."""
    if isinstance(frame, pa.Table):
        if frame.num_rows == 0:
            return None
        micros = pc.cast(frame[column], pa.int64()).to_numpy(zero_copy_only=False)
        return (
            float(np.percentile(micros, 50)),
            float(np.percentile(micros, 1)),
            float(micros.min()),
        )
    row = (
        frame.select(F.unix_micros(F.col(column)).alias("t"))
        .agg(F.percentile_approx("t", [0.01, 0.5], 1000).alias("q"), F.min("t").alias("lo"))
        .collect()[0]
    )
    if row["lo"] is None:
        return None
    return float(row["q"][1]), float(row["q"][0]), float(row["lo"])


def columns_of(frame: Frame) -> list[str]:
    """Column names."""
    return list(frame.column_names if isinstance(frame, pa.Table) else frame.columns)
