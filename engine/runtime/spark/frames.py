"""An epoch's rows between operators: a Spark DataFrame (what the VSN stages emit stays
one, on the executors), or an Arrow table where rows are already local, converted only
when needed."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from functools import reduce
from typing import Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

Frame = Union[DataFrame, pa.Table]  # noqa: UP007  # a runtime alias, not an annotation

def to_spark(spark: SparkSession, frame: Frame) -> DataFrame:
    """The frame as a DataFrame."""
    return frame if isinstance(frame, DataFrame) else spark.createDataFrame(frame)


def to_arrow(frame: Frame) -> pa.Table:
    """The frame as an Arrow table (collects a DataFrame)."""
    return frame if isinstance(frame, pa.Table) else frame.toArrow()


def empty_of(spark: SparkSession, struct: T.StructType) -> pa.Table:
    """No rows, with the Arrow schema ``toArrow()`` gives a DataFrame of schema ``struct``
    (no Spark job, no analysis of a plan)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    large = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes") == "true"
    schema = to_arrow_schema(struct, error_on_duplicated_field_names_in_struct=True,
                             timezone="UTC", prefers_large_types=large)
    return schema.empty_table()


def union(spark: SparkSession, frames: list[Frame]) -> Frame:
    """Union by column name (Arrow stays Arrow when every input is Arrow)."""
    if all(isinstance(f, pa.Table) for f in frames):
        return pa.concat_tables(frames, promote_options="default")  # type: ignore[arg-type]
    return reduce(DataFrame.unionByName, [to_spark(spark, frame) for frame in frames])


def time_quantiles(frame: pa.Table, column: str) -> tuple[float, float, float] | None:
    """(median, 1st percentile, minimum) of a timestamp column of rows already local, in
    epoch micros."""
    if frame.num_rows == 0:
        return None
    micros = pc.cast(frame[column], pa.int64()).to_numpy(zero_copy_only=False)
    return (
        float(np.percentile(micros, 50)),
        float(np.percentile(micros, 1)),
        float(micros.min()),
    )


_OBSERVATIONS = itertools.count()


def observation_name(base: str) -> str:
    """``base`` made unique in this process. Spark completes an observation by its name: an
    epoch's attempt after a void one observes the same operator again, and under the void
    attempt's name its count never came (the void one, never filled, took it)."""
    return f"{base}_{next(_OBSERVATIONS)}"


def observed(observation: Observation, wait_s: float = 0.0) -> bool:
    """Whether an action filled the observation (``get`` would block forever otherwise: a
    sink that skipped a replayed epoch runs no action), waiting up to ``wait_s`` for it:
    Spark's listener fills it a moment after the action's job ended."""
    jo = getattr(observation, "_jo", None)
    if jo is None:
        return False
    deadline = time.monotonic() + wait_s
    while not jo.future().isCompleted():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


QuantilesRead = Callable[[], "tuple[float, float, float] | None"]
"""Reads (median, 1st percentile, minimum) once the frame's action ran: None if it ran
none (a sink that skipped a replayed epoch) or the frame had no rows."""


def observe_time_quantiles(frame: Frame, column: str, name: str) -> tuple[Frame, QuantilesRead]:
    """The frame, and how to read the quantiles of ``column`` (``time_quantiles``). A
    DataFrame's are computed by the action that consumes the returned DataFrame (a sink's
    write), so reading them costs no Spark job of its own."""
    if isinstance(frame, pa.Table):
        return frame, lambda: time_quantiles(frame, column)
    observation = Observation(observation_name(name))
    micros = F.unix_micros(F.col(column))
    watched = frame.observe(
        observation,
        F.percentile_approx(micros, [0.01, 0.5], 1000).alias("q"),
        F.min(micros).alias("lo"),
    )

    def read() -> tuple[float, float, float] | None:
        if not observed(observation):
            return None
        found = observation.get
        if found.get("lo") is None:
            return None
        return float(found["q"][1]), float(found["q"][0]), float(found["lo"])

    return watched, read


def columns_of(frame: Frame) -> list[str]:
    """Column names."""
    return list(frame.column_names if isinstance(frame, pa.Table) else frame.columns)
