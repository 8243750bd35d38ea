"""An epoch's id range: the rows and tasks of ``spark.range(first, end)``, in code Spark
compiles once for every epoch of the same size."""

from __future__ import annotations

import pytest

from engine.runtime.io.sources import GeneratorSpec, epoch_ids, generator_rows

pytestmark = pytest.mark.spark


def _by_task(df):  # type: ignore[no-untyped-def]
    return df.rdd.mapPartitionsWithIndex(lambda i, rows: [(i, r.id) for r in rows]).collect()


@pytest.mark.parametrize(
    ("first", "end", "tasks"),
    [(0, 10, 3), (123_456_789, 123_456_800, 2), (10**16, 10**16 + 7, 2), (10**17, 10**17 + 5, 2)],
)
def test_epoch_ids_are_the_range_in_the_same_tasks(spark, first, end, tasks) -> None:  # type: ignore[no-untyped-def]
    expected = _by_task(spark.range(first, end, numPartitions=tasks))
    assert _by_task(epoch_ids(spark, first, end, tasks)) == expected


def test_epochs_of_one_size_compile_their_code_once(spark) -> None:  # type: ignore[no-untyped-def]
    compilations = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    spec = GeneratorSpec.from_params({"rows_per_second": 1000, "keys": 50}, 1_700_000_000_000)

    def epoch(index: int) -> list[int]:
        rows = generator_rows(spark, spec, index * 1000, (index + 1) * 1000, 2)
        return [r.campaign_id for r in rows.where("user_id % 7 = 0").collect()]

    epoch(0)
    before = compilations.METRIC_COMPILATION_TIME().getCount()
    later = [epoch(i) for i in range(1, 4)]
    assert compilations.METRIC_COMPILATION_TIME().getCount() == before
    assert len({tuple(rows) for rows in later}) == 3  # three epochs, three sets of rows
