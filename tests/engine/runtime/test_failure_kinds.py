"""A run's failure is weighed before its supervisor restarts it: the job's own errors (they
recur on the same data and plan) are told from transient ones, and the operator they arose
in is named. Texts as Spark and the driver write them."""

from __future__ import annotations

import pytest

from engine.errors import DagValidationError, Problem
from engine.runtime.errors import UnsupportedJobError, failure_of

OPERATORS = [
    {"id": "events", "type": "source.redis_stream", "params": {"streams": ["s"]}},
    {"id": "ratio", "type": "map", "params": {"columns": {"per_user": "amount / user_count"}}},
    {"id": "big", "type": "filter", "params": {"condition": "amount > 10"}},
    {"id": "out", "type": "sink.files", "params": {"path": "out", "format": "json"}},
]

DIVIDE_BY_ZERO = (
    "[STREAM_FAILED] Query [id = 1] terminated with exception: Job aborted due to stage "
    "failure: Lost task 0.0: org.apache.spark.SparkArithmeticException: [DIVIDE_BY_ZERO] "
    "Division by zero. Use `try_divide` to tolerate divisor being 0 and return NULL instead. "
    "SQLSTATE: 22012\n== SQL (line 1, position 1) ==\namount / user_count\n^^^^^^^^^^^^^^^^^^^\n")
EPOCH_TRACEBACK = (
    "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call "
    "last):\n  File \"x.py\", line 1, in call\n    raise\n"
    "engine.runtime.errors.UnsupportedJobError: path '../x' must be relative to the data "
    "folder, without '..'\n")


@pytest.mark.parametrize(("error", "operator"), [
    (RuntimeError(DIVIDE_BY_ZERO), "ratio"),
    (RuntimeError("[CAST_INVALID_INPUT] The value 'click' of the type \"STRING\" cannot be "
                  "cast to \"INT\"\n== SQL (line 1, position 1) ==\namount > 10\n"), "big"),
    (RuntimeError("[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `amout` cannot be resolved"),
     None),
    (RuntimeError("[PATH_NOT_FOUND] Path does not exist: file:/data/in"), None),
    (RuntimeError(EPOCH_TRACEBACK), None),
    (UnsupportedJobError("sink.files: unknown format 'xml'"), "out"),
    (DagValidationError([Problem("operator 'big'", "missing required param 'condition'")]),
     "big"),
    (RuntimeError("psycopg2.errors.UndefinedColumn: column \"n\" of relation \"t\" does not "
                  "exist"), None),
])
def test_the_jobs_own_errors_are_not_retried_and_name_their_operator(error, operator) -> None:
    failure = failure_of(error, OPERATORS)
    assert failure.kind == "job" and not failure.retried
    assert failure.operator == operator
    assert "not retried" in failure.describe()


@pytest.mark.parametrize("error", [
    ConnectionRefusedError(111, "Connection refused"),
    BrokenPipeError(32, "Broken pipe"),
    RuntimeError("org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)"),
    RuntimeError("py4j.protocol.Py4JNetworkError: Answer from Java side is empty"),
    RuntimeError("redis.exceptions.ConnectionError: Error 111 connecting to broker.invalid:6390. "
                 "Connection refused."),
    RuntimeError("psycopg2.OperationalError: server closed the connection unexpectedly"),
    RuntimeError("something nobody has seen before"),
])
def test_transient_and_unknown_failures_are_retried(error) -> None:
    failure = failure_of(error, OPERATORS)
    assert failure.kind == "transient" and failure.retried
    assert failure.describe().endswith("(a transient failure, retried)")
