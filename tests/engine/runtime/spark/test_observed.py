"""An epoch reads the row counts its actions observed: Spark's listener fills an observation
a moment after the action's job ended, so the read waits for one whose action ran, and never
blocks on one no action consumed."""

from __future__ import annotations

import time

import pytest
from pyspark.sql import Observation
from pyspark.sql import functions as F

from engine.runtime.spark.frames import observation_name, observed

pytestmark = pytest.mark.spark


def test_an_observation_is_read_once_its_action_ended(spark) -> None:  # type: ignore[no-untyped-def]
    observation = Observation("rows_read")
    spark.range(1000).observe(observation, F.count(F.lit(1)).alias("rows")).collect()

    assert observed(observation, wait_s=5.0)
    assert observation.get["rows"] == 1000


def test_an_observation_no_action_consumed_is_waited_for_no_longer_than_asked(spark) -> None:  # type: ignore[no-untyped-def]
    unused = Observation("rows_unused")
    spark.range(10).observe(unused, F.count(F.lit(1)).alias("rows"))
    started = time.monotonic()

    assert not observed(unused, wait_s=0.2)
    assert 0.2 <= time.monotonic() - started < 1.0
    assert not observed(Observation("never_attached"), wait_s=5.0)


def test_an_operator_observed_again_in_an_epoch_gets_its_own_count(spark) -> None:  # type: ignore[no-untyped-def]
    # An epoch's attempt after a void one observes its operators again. Spark completes the
    # first observation registered under a name: one of the void attempt, never filled, kept
    # the next attempt's count from it under the same name.
    rows = spark.range(100).persist()
    try:
        void = Observation(observation_name("rows_events_3"))
        rows.observe(void, F.count(F.lit(1)).alias("rows"))  # its action was cancelled
        again = Observation(observation_name("rows_events_3"))
        rows.observe(again, F.count(F.lit(1)).alias("rows")).collect()

        assert observed(again, wait_s=5.0)
        assert again.get["rows"] == 100
    finally:
        rows.unpersist()
