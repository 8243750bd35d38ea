"""How a run ends: a stop (asked at any moment, even mid-epoch) is a stop, a failing epoch is
a failure with Spark's error in one readable line; told apart by the query's state."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from engine.runtime.api import start_run, stop_run
from engine.runtime.driver.metrics import CollectingPublisher
from engine.runtime.errors import failure_summary
from tests.engine.runtime.jobs import wait_epoch, window_job

# Spark's ANSI mode fails the cast of a string like 'view' at run time: every epoch fails.
FAILING_CONDITION = "CAST(event_type AS INT) IS NULL"


def _start(spark: Any, tmp_path: Any, condition: str) -> Any:
    name = f"sink_{uuid.uuid4().hex[:8]}"
    job = window_job({"type": "sink.memory", "params": {"name": name}}, condition=condition)
    return start_run(job, checkpoint=str(tmp_path / "ckpt"), publisher=CollectingPublisher(),
                     spark=spark, epoch_ms=1000, trigger_ms=0)


@pytest.mark.spark
def test_a_stop_between_back_to_back_epochs_is_a_stop_without_an_error(spark, tmp_path) -> None:
    run = _start(spark, tmp_path, "event_type = 'view'")
    wait_epoch(run, 2)

    assert stop_run(run) == "stopped"

    assert run.failure() is None and run.error is None
    assert run.wait(timeout_s=5) == "stopped"


@pytest.mark.spark
def test_a_failing_epoch_fails_the_run_with_its_cause_in_one_line(spark, tmp_path) -> None:
    run = _start(spark, tmp_path, FAILING_CONDITION)

    assert run.wait(timeout_s=180) == "failed"

    assert run.error is not None and run.failure() is not None
    summary = failure_summary(run.error)
    assert "\n" not in summary and "CAST_INVALID_INPUT" in summary


def test_the_summary_is_the_python_exception_that_ended_the_epoch() -> None:
    wrapped = RuntimeError(
        "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function.\n"
        "Traceback (most recent call last):\n"
        '  File "/x/driver.py", line 3, in _on_batch\n'
        "    store.write_groups(...)\n"
        "redis.exceptions.ConnectionError: Error 111 connecting to 127.0.0.1:7000.\n"
        "\tat org.apache.spark.Something(Something.scala:1)\n")

    assert failure_summary(wrapped) == (
        "redis.exceptions.ConnectionError: Error 111 connecting to 127.0.0.1:7000.")
    assert failure_summary(ValueError("first line\nsecond")) == "first line"
    assert failure_summary(ValueError("")) == "ValueError"
    assert len(failure_summary(ValueError("x" * 1000))) == 400
