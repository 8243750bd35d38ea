"""The VSN stage on the Spark side: key groups, routing to instances, one collect.

Per epoch: ``kg = pmod(xxhash64(key...), K)`` in Spark SQL (equal to
``engine.mapping.key_group_of``), ``instance = owners[kg]`` from the epoch's assignment,
and ``repartitionById(P, instance)``: partition i holds exactly instance i's key groups.
The instances (``mapInArrow``) merge into the shared store. Their output is cached on the
executors and computed once: the reports (one small row per instance) are collected to
the driver, the emitted rows stay a DataFrame that the next operators and the sinks read
from the executors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from engine.runtime.operators.columns import KG, TIME_US
from engine.runtime.operators.dedupe import DedupeSpec
from engine.runtime.operators.join import LEFT, RIGHT, SIDE, JoinSpec
from engine.runtime.operators.window_spec import WINDOW_END, WINDOW_START, WindowSpec
from engine.runtime.operators.window_worker import window_state_schema
from engine.runtime.stage import routing_code
from engine.runtime.stage.vsn_worker import REPORT, EpochTask, run_instance
from engine.runtime.state import StoreSpec

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


@dataclass(frozen=True)
class StageResult:
    """The instance reports and ``cached``, the instances' output (emitted rows and
    reports, cached on the executors: to unpersist once the epoch is done). The emitted
    rows are ``rows()``, of schema ``schema``, with the ``timestamps`` columns (micros in
    the instances' output: a window's bounds) as timestamps; built only for an epoch that
    emitted some, since each DataFrame step costs the driver an analysis of the plan."""

    cached: DataFrame
    reports: list[dict[str, Any]]
    emitted: T.StructType
    """The emitted rows' columns as the instances write them."""
    timestamps: tuple[str, ...] = ()
    kept: bool = True
    """Whether ``cached`` is kept on the executors (to release): not for an epoch whose
    output was the reports alone."""

    @property
    def schema(self) -> T.StructType:
        """The schema of ``rows()``, known without Spark."""
        return T.StructType([
            T.StructField(f.name, T.TimestampType(), True) if f.name in self.timestamps else f
            for f in self.emitted.fields
        ])

    def rows(self) -> DataFrame:
        """The emitted rows as a DataFrame read from the cached output."""
        rows = self.cached.where(F.col(REPORT).isNull()).drop(REPORT)
        if not self.timestamps:
            return rows
        return rows.withColumns(
            {name: F.timestamp_micros(F.col(name)) for name in self.timestamps})


@dataclass(frozen=True)
class StageEpoch:
    """Where and how one epoch of a keyed operator runs (its watermark in event-time
    micros)."""

    epoch: int
    key_groups: int
    owners: tuple[int, ...]
    parallelism: int
    watermark_us: int | None
    store: StoreSpec
    closes: bool = True
    """Whether the watermark may close a window in the epoch (a window aggregate's
    instances emit nothing otherwise)."""


@lru_cache(maxsize=64)
def key_group_column(keys: tuple[str, ...], key_groups: int) -> Column:
    """Spark SQL ``pmod(xxhash64(keys...), K)``; a keyless stage uses key group 0. The
    epoch's columns are built once per process (``_stage_columns``): a column is a JVM
    object any plan may use, and building one costs the driver calls into the JVM."""
    if not keys:
        return F.lit(0).cast("int")
    return F.pmod(F.xxhash64(*[F.col(k) for k in keys]), F.lit(key_groups)).cast("int")


@lru_cache(maxsize=16)
def instance_column(owners: tuple[int, ...]) -> Column:
    """``owners[kg]`` as a literal array lookup (the assignment of this epoch), built from
    one SQL string: a ``lit`` per key group would cost a JVM round trip each, per epoch."""
    array = ", ".join(str(int(o)) for o in owners)
    return F.expr(f"CAST(element_at(array({array}), {KG} + 1) AS INT)")


def stage_input(spec: WindowSpec, df: DataFrame, key_groups: int) -> DataFrame:
    """Rows reduced to what the instances need: kg, keys, aggregate inputs and event time
    in micros. The instances assign the windows (``assign_windows``, which also drops rows
    without an event time, as Spark's ``window`` does), so a row crosses the shuffle and the
    Python boundary once, not once per window it falls in. One projection: each DataFrame
    step costs the driver an analysis of the whole plan, every epoch."""
    inputs = sorted({p.column for p in spec.partials if p.column is not None})
    return df.select(*_stage_columns(spec.keys, tuple(inputs), spec.time, key_groups))


@lru_cache(maxsize=64)
def _stage_columns(
    keys: tuple[str, ...], inputs: tuple[str, ...], time: str, key_groups: int
) -> tuple[Column, ...]:
    return (
        key_group_column(keys, key_groups).alias(KG),
        *[F.col(k) for k in keys],
        *[F.col(c) for c in inputs if c not in keys],
        F.unix_micros(F.col(time)).alias(TIME_US),
    )


def output_struct(spec: WindowSpec, rows: DataFrame) -> T.StructType:
    """The mapInArrow schema: keys, window bounds (micros), aggregates and the report."""
    types = {f.name: f.dataType for f in rows.schema.fields}
    fields: list[tuple[str, T.DataType]] = [(k, types[k]) for k in spec.keys]
    fields += [(WINDOW_START, T.LongType()), (WINDOW_END, T.LongType())]
    fields += [(a.name, _aggregate_type(spec, a.partials[0], types)) for a in spec.aggregates]
    return _with_report(fields)


def _aggregate_type(
    spec: WindowSpec, partial_name: str, types: dict[str, T.DataType]
) -> T.DataType:
    partial_spec = next(p for p in spec.partials if p.name == partial_name)
    agg = next(a for a in spec.aggregates if partial_name in a.partials)
    if agg.func == "avg":
        return T.DoubleType()
    if agg.func == "count" or partial_spec.column is None:
        return T.LongType()
    source = types[partial_spec.column]
    if agg.func == "sum":
        return T.LongType() if isinstance(source, _INTEGRAL) else T.DoubleType()
    return source


def run_window_stage(spec: WindowSpec, df: DataFrame, at: StageEpoch) -> StageResult:
    """Runs one epoch of a window aggregate through the VSN instances."""
    rows = stage_input(spec, df, at.key_groups)
    struct = output_struct(spec, rows)
    state_schema = window_state_schema(spec, _arrow_schema(rows, rows.schema))
    return replace(_run_stage(spec, rows, struct, at, state_schema),
                   timestamps=(WINDOW_START, WINDOW_END))


def run_dedupe_stage(spec: DedupeSpec, df: DataFrame, at: StageEpoch) -> StageResult:
    """Runs one epoch of a dedupe through the VSN instances; rows keep their columns."""
    struct = _with_report([(f.name, f.dataType) for f in df.schema.fields])
    rows = df.withColumn(KG, key_group_column(spec.keys, at.key_groups)).withColumn(
        TIME_US, F.unix_micros(F.col(spec.time))
    )
    return _run_stage(spec, rows, struct, at)


def join_input(
    spec: JoinSpec, left: DataFrame, right: DataFrame, key_groups: int
) -> tuple[JoinSpec, DataFrame, T.StructType]:
    """Both sides as one routable input: (kg, side, event time in micros, the left
    columns, the right-only columns), each row with the other side's columns null; the
    spec with its column layout; and the instances' output schema (the pair's columns and
    the report). Right key columns are cast to the left's types first, so equal keys hash
    to the same key group."""
    spec = spec.with_layout(left.columns, right.columns)
    left_types = {f.name: f.dataType for f in left.schema.fields}
    right_types = {f.name: f.dataType for f in right.schema.fields}
    right = right.withColumns({k: F.col(k).cast(left_types[k]) for k in spec.keys})

    def shaped(df: DataFrame, which: int) -> DataFrame:
        mine = set(spec.left_columns) if which == LEFT else {*spec.keys, *spec.right_columns}

        def column(name: str, kind: T.DataType) -> Column:
            return F.col(name) if name in mine else F.lit(None).cast(kind).alias(name)

        return df.select(
            key_group_column(spec.keys, key_groups).alias(KG),
            F.lit(which).cast("tinyint").alias(SIDE),
            F.unix_micros(F.col(spec.time)).alias(TIME_US),
            *[column(c, left_types[c]) for c in spec.left_columns],
            *[column(c, right_types[c]) for c in spec.right_columns],
        )

    rows = shaped(left, LEFT).union(shaped(right, RIGHT))
    struct = _with_report(
        [(c, left_types[c]) for c in spec.left_columns]
        + [(c, right_types[c]) for c in spec.right_columns]
    )
    return spec, rows, struct


def run_join_stage(
    spec: JoinSpec, inputs: tuple[DataFrame, DataFrame], at: StageEpoch
) -> StageResult:
    """Runs one epoch of a stream-stream join through the VSN instances."""
    left, right = inputs
    spec, rows, struct = join_input(spec, left, right, at.key_groups)
    return _run_stage(spec, rows, struct, at)


def _with_report(fields: list[tuple[str, T.DataType]]) -> T.StructType:
    """The instances' output schema: the emitted rows' columns and the report column."""
    return T.StructType(
        [T.StructField(name, kind, True) for name, kind in fields]
        + [T.StructField(REPORT, T.StringType(), True)]
    )


def _arrow_schema(rows: DataFrame, struct: T.StructType) -> pa.Schema:
    timezone = rows.sparkSession.conf.get("spark.sql.session.timeZone")
    return to_arrow_schema(struct, timezone=timezone)


def _run_stage(
    spec: WindowSpec | DedupeSpec | JoinSpec,
    rows: DataFrame,
    struct: T.StructType,
    at: StageEpoch,
    state_schema: pa.Schema | None = None,
) -> StageResult:
    """The epoch's task for the instances (``struct`` as an Arrow schema), run on them;
    their output is not cached in an epoch in which they cannot emit (``at.closes``)."""
    task = EpochTask(
        spec, at.store, at.epoch, at.watermark_us, at.owners, _arrow_schema(rows, struct),
        state_schema,
    )
    emitted = T.StructType([f for f in struct.fields if f.name != REPORT])
    routing_code.routed(spec.operator, rows, at.parallelism)
    routed = rows.repartitionById(at.parallelism, instance_column(task.owners))
    output = routed.mapInArrow(partial(run_instance, task), struct)
    if at.closes:
        cached, reports = _run_instances(output)
        return StageResult(cached=cached, reports=reports, emitted=emitted)
    found, reports = _reports_of(output, struct)
    return StageResult(cached=output if found is None else found, reports=reports,
                       emitted=emitted, kept=found is not None)


def _reports_of(
    output: DataFrame, struct: T.StructType
) -> tuple[DataFrame | None, list[dict[str, Any]]]:
    """The instances run once, their output collected whole with no cache: in an epoch
    that closes no window it is one report per instance, and a cache would cost the
    driver a plan of the query (``persist``) and one more for the collect over it. Rows
    emitted all the same (not expected) are kept as a DataFrame, with their reports."""
    collected = output.collect()
    reports = [json.loads(row[REPORT]) for row in collected if row[REPORT] is not None]
    emitted = [row for row in collected if row[REPORT] is None]
    if not emitted:
        return None, reports
    return output.sparkSession.createDataFrame(emitted, struct), reports


def _run_instances(output: DataFrame) -> tuple[DataFrame, list[dict[str, Any]]]:
    """Runs the instances once (their output cached on the executors) and collects only
    their reports. The rows were routed to their instances by the shuffle itself
    (``owners[kg]``), so the instance does not travel with the rows."""
    output = output.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        # The report rows whole (their other columns are null): a select on top would
        # cost the driver one more analysis of the plan, every epoch.
        collected = output.where(F.col(REPORT).isNotNull()).collect()
    except BaseException:
        # A failed epoch's output, partly computed: released here, as the caller never
        # gets it to release.
        output.unpersist()
        raise
    return output, [json.loads(row[REPORT]) for row in collected]
