"""A keyed stage's routing to a new parallelism is compiled ahead, by the code cache the
stage's own tasks read: the routing job that follows compiles nothing."""

from __future__ import annotations

import logging

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from engine.runtime.operators.columns import KG
from engine.runtime.stage import routing_code
from engine.runtime.stage.vsn_stage import instance_column, key_group_column

pytestmark = pytest.mark.spark


def _compilations(spark: SparkSession) -> int:
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def _route(rows: DataFrame, parallelism: int) -> int:
    """Routes ``rows`` as a keyed stage does; the classes compiled meanwhile."""
    before = _compilations(rows.sparkSession)
    owners = tuple(kg % parallelism for kg in range(64))
    rows.repartitionById(parallelism, instance_column(owners)).write.format("noop").mode(
        "overwrite").save()
    return _compilations(rows.sparkSession) - before


@pytest.mark.parametrize("layout", ["window", "dedupe"])
def test_a_parallelism_compiled_ahead_is_routed_to_without_compiling(spark, layout) -> None:  # type: ignore[no-untyped-def]
    base = spark.range(0, 5000, 1, 2).select(
        (F.col("id") % 700).cast("string").alias("k"), F.col("id").alias("v"))
    if layout == "window":  # the key group first, as ``stage_input`` puts it
        rows = base.select(key_group_column(("k",), 64).alias(KG), "k", "v")
        ahead, control = 41, 43
    else:  # the key group after the input's columns, as ``run_dedupe_stage`` adds it
        rows = base.withColumn(KG, key_group_column(("k",), 64)).withColumn("t", F.col("v"))
        ahead, control = 47, 53
    operator = f"routing-{layout}"
    _route(rows, 2)
    routing_code.routed(operator, rows, 2)

    thread = routing_code.compile_ahead(spark, operator, ahead, "test-routing-code")
    assert thread is not None
    thread.join(60)
    assert _route(rows, ahead) == 0
    # A parallelism not compiled ahead compiles its routing in its first job.
    assert _route(rows, control) >= 1
    assert _route(rows, control) == 0


def test_nothing_is_compiled_ahead_for_an_unknown_stage_or_a_parallelism_it_routed(spark) -> None:  # type: ignore[no-untyped-def]
    rows = spark.range(10).select(key_group_column(("id",), 64).alias(KG))
    assert routing_code.compile_ahead(spark, "routing-unseen", 5, "test-routing-code") is None
    routing_code.routed("routing-seen", rows, 6)
    assert routing_code.compile_ahead(spark, "routing-seen", 6, "test-routing-code") is None


def test_a_failed_compile_is_logged_and_tried_again_next_time(spark, monkeypatch, caplog) -> None:  # type: ignore[no-untyped-def]
    rows = spark.range(10).select(key_group_column(("id",), 64).alias(KG))
    routing_code.routed("routing-failing", rows, 2)

    def fails(*args: object) -> None:
        raise RuntimeError("no executor")

    monkeypatch.setattr(routing_code, "compile_routing", fails)
    with caplog.at_level(logging.WARNING, logger="streamscale.run"):
        thread = routing_code.compile_ahead(spark, "routing-failing", 59, "test-routing-code")
        assert thread is not None
        thread.join(10)
    assert "routing of routing-failing to 59 instances ahead failed: no executor" in caplog.text
    monkeypatch.undo()
    again = routing_code.compile_ahead(spark, "routing-failing", 59, "test-routing-code")
    assert again is not None
    again.join(60)
