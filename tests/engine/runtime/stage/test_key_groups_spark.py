"""Spark SQL's key group equals engine.mapping.key_group_of for every key shape."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from engine.mapping import key_group_of
from engine.runtime.stage.vsn_stage import key_group_column

pytestmark = pytest.mark.spark


def test_spark_key_groups_match_the_python_mapping(spark) -> None:  # type: ignore[no-untyped-def]
    rows = [(i * 7919 - 50_000, f"campaign-{i}", i % 3) for i in range(300)]
    rows += [(2**62, "", -1), (-(2**63), "ünïcødé", 0)]
    df = spark.createDataFrame(rows, "l long, s string, i long")
    for keys, groups in ((("l",), 128), (("s",), 128), (("l", "s"), 64), (("s", "i"), 7)):
        got = df.select(*keys, key_group_column(keys, groups).alias("kg")).collect()
        for row in got:
            assert row["kg"] == key_group_of(tuple(row[k] for k in keys), groups), (keys, row)


def test_instance_routing_gives_each_partition_exactly_its_key_groups(spark) -> None:  # type: ignore[no-untyped-def]
    from engine.mapping import balanced_assignment
    from engine.runtime.operators.columns import KG
    from engine.runtime.stage.vsn_stage import instance_column

    owners = balanced_assignment(32, 5).owners
    df = spark.range(5000).withColumn(KG, key_group_column(("id",), 32))
    routed = df.withColumn("inst", instance_column(owners)).repartitionById(5, F.col("inst"))
    per_partition = routed.select(F.spark_partition_id().alias("p"), KG).distinct().collect()
    for row in per_partition:
        assert owners[row[KG]] == row["p"]
