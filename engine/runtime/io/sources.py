"""Sources: the deterministic generator, the rate source and file directories.

The generator and the rate source are clock sources: the epoch's logged plan fixes the
range of row ids it takes (``engine.runtime.io.source_load``), and every column derives from
(seed, row id) with Spark SQL hash functions, so replaying an epoch regenerates identical
rows, which the exactly-once guarantee relies on. A directory source's epoch takes the files
its plan names (``new_files``), read as a batch.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from engine.dag.catalog import OPERATOR_TYPES
from engine.runtime.errors import UnsupportedJobError
from engine.runtime.io.broker.event_draws import TYPE_CUTS, USERS
from engine.runtime.io.data_access import resolve_data_path

_UNIT = float(2**53)


@dataclass(frozen=True)
class GeneratorSpec:
    """The parameters of ``source.generator``, made by ``from_params`` with the catalog's
    defaults applied."""

    rows_per_second: int
    keys: int
    skew: float
    seed: int
    start_ms: int
    event_types: tuple[str, ...] | None

    @classmethod
    def from_params(cls, params: Mapping[str, Any], start_ms: int = 0) -> GeneratorSpec:
        """Reads the operator params; ``start_ms`` anchors event time of event 0."""
        given = {**OPERATOR_TYPES["source.generator"].defaults(), **params}
        types = given.get("event_types")
        return cls(
            rows_per_second=int(given.get("rows_per_second", 1000)),
            keys=int(given["keys"]),
            skew=float(given["skew"]),
            seed=int(given["seed"]),
            start_ms=start_ms,
            event_types=tuple(types) if types else None,
        )


def _hash(spec: GeneratorSpec, event_id: Column, salt: int) -> Column:
    return F.xxhash64(F.lit(spec.seed), event_id, F.lit(salt))


def _uniform(spec: GeneratorSpec, event_id: Column, salt: int) -> Column:
    # A double in (0, 1) from the 53 low bits of the hash.
    return (F.pmod(_hash(spec, event_id, salt), F.lit(2**53)) + F.lit(0.5)) / F.lit(_UNIT)


def _campaign(spec: GeneratorSpec, event_id: Column) -> Column:
    if spec.skew <= 0:
        return F.pmod(_hash(spec, event_id, 1), F.lit(spec.keys))
    # Inverse CDF of a continuous power law on [1, keys + 1]: rank r has weight ~ r^-skew.
    u = _uniform(spec, event_id, 1)
    n1 = float(spec.keys + 1)
    if abs(spec.skew - 1.0) < 1e-9:
        x = F.pow(F.lit(n1), u)
    else:
        e = 1.0 - spec.skew
        x = F.pow(F.lit(1.0) + u * F.lit(n1**e - 1.0), F.lit(1.0 / e))
    return F.least(F.floor(x).cast("long") - 1, F.lit(spec.keys - 1))


def _event_type(spec: GeneratorSpec, event_id: Column) -> Column:
    if spec.event_types:
        choices = F.array(*[F.lit(t) for t in spec.event_types])
        index = F.pmod(_hash(spec, event_id, 3), F.lit(len(spec.event_types))) + 1
        return F.element_at(choices, index.cast("int"))
    bucket = F.pmod(_hash(spec, event_id, 3), F.lit(100))
    expr = F.when(bucket < TYPE_CUTS[0][0], F.lit(TYPE_CUTS[0][1]))
    expr = expr.when(bucket < TYPE_CUTS[1][0], F.lit(TYPE_CUTS[1][1]))
    return expr.otherwise(F.lit("purchase"))


@lru_cache(maxsize=64)
def generator_columns(spec: GeneratorSpec, id_column: str = "value") -> tuple[Column, ...]:
    """The generator's output columns as functions of the long column ``id_column``.
    Built once per spec: a column is a JVM object that any plan may use, and building
    these takes ~100 calls into the JVM, which an epoch would pay again."""
    event_id = F.col(id_column)
    # Integer division keeps event time exact for any event id.
    micros = F.expr(f"{spec.start_ms * 1000} + ({id_column} * 1000000) div {spec.rows_per_second}")
    return (
        event_id.cast("long").alias("event_id"),
        F.timestamp_micros(micros).alias("event_time"),
        _campaign(spec, event_id).cast("long").alias("campaign_id"),
        F.pmod(_hash(spec, event_id, 2), F.lit(USERS)).alias("user_id"),
        _event_type(spec, event_id).alias("event_type"),
        (F.pmod(_hash(spec, event_id, 4), F.lit(100_000)) / F.lit(100.0)).alias("amount"),
    )


def generator_rows(
    spark: SparkSession, spec: GeneratorSpec, first: int, end: int, partitions: int
) -> DataFrame:
    """One epoch of the generator: event ids in [first, end) over ``partitions`` tasks (the
    source's parallelism). The range comes from the epoch's logged plan, so a replay
    regenerates identical rows."""
    return epoch_ids(spark, first, end, partitions).select(*generator_columns(spec, "id"))


# The widest decimal Spark keeps in a long: offset ids below 10**17 stay this cheap.
_OFFSET_DIGITS = 17


def epoch_ids(spark: SparkSession, first: int, end: int, partitions: int) -> DataFrame:
    """The ids [first, end) as column ``id`` over ``partitions`` tasks, split as
    ``spark.range(first, end)`` splits them. Spark writes a range's bounds and integer
    literals into the code it compiles for a stage, so an epoch's own range cost two
    compilations on the driver before its job could start. Here the range is
    [0, end - first), the same every epoch of a steady rate, and ``first`` is added as a
    decimal literal, which the compiled code reads from its references instead of its
    text."""
    slices = max(1, partitions)
    if end >= 10**_OFFSET_DIGITS:
        return spark.range(first, end, numPartitions=slices)
    decimal = f"DECIMAL({_OFFSET_DIGITS},0)"
    shifted = F.expr(f"CAST(CAST(id AS {decimal}) + CAST({first}BD AS {decimal}) AS BIGINT)")
    return spark.range(0, end - first, numPartitions=slices).select(shifted.alias("id"))


def rate_rows(
    spark: SparkSession, params: Mapping[str, Any], start_ms: int, first: int, end: int,
    partitions: int,
) -> DataFrame:
    """One epoch of ``source.rate``: (timestamp, value) for values in [first, end), value i
    stamped when it fell due (``start_ms + i / rows_per_second``)."""
    rate = int(params.get("rows_per_second", 1000))
    ids = epoch_ids(spark, first, end, partitions)
    micros = F.expr(f"{start_ms * 1000} + (id * 1000000) div {rate}")
    return ids.select(F.timestamp_micros(micros).alias("timestamp"), F.col("id").alias("value"))


def files_schema(params: Mapping[str, Any]) -> str:
    """A files source's schema as DDL: ``schema`` maps column -> Spark type, or is DDL."""
    if "path" not in params or "schema" not in params:
        raise UnsupportedJobError("source.files: params 'path' and 'schema' are required")
    schema = params["schema"]
    if isinstance(schema, Mapping):
        schema = ", ".join(f"`{name}` {kind}" for name, kind in schema.items())
    return str(schema)


def new_files(params: Mapping[str, Any], taken: Collection[str]) -> list[str]:
    """The files of a directory source that no epoch has taken yet, oldest first (by
    modification time, then name), at most ``max_files_per_trigger``: an epoch's share,
    fixed in its plan. Hidden and temporary names (``.``, ``_``) are left out, as Spark's
    file sources leave them."""
    folder = resolve_data_path(str(params["path"]))
    try:
        entries = [e for e in os.scandir(folder)
                   if e.is_file() and not e.name.startswith((".", "_")) and e.path not in taken]
    except FileNotFoundError:
        return []
    entries.sort(key=lambda e: (e.stat().st_mtime_ns, e.name))
    cap = int(params.get("max_files_per_trigger") or 0)
    return [e.path for e in (entries[:cap] if cap > 0 else entries)]


def file_rows(spark: SparkSession, params: Mapping[str, Any], files: list[str]) -> DataFrame:
    """The rows of ``files`` (JSON, CSV with a header, or Parquet) in the source's schema."""
    fmt = str(params.get("format", "json"))
    if fmt not in ("json", "csv", "parquet"):
        raise UnsupportedJobError(f"source.files: unknown format {fmt!r}")
    schema = files_schema(params)
    if not files:
        return spark.createDataFrame([], schema)
    reader = spark.read.format(fmt).schema(schema)
    if fmt == "csv":
        reader = reader.option("header", "true")
    return reader.load(files)
