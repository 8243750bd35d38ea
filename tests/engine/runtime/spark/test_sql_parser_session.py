"""The validator's expression parser answers the same inside a process with an active Spark
session (a driver, or a test suite that started one), where pyspark converts the JVM's
errors into its own exception classes."""

from __future__ import annotations

import pytest

from engine.dag.expressions import ExpressionSyntaxError
from engine.runtime.spark.sql_parser import parse_expression_tree

pytestmark = pytest.mark.spark


def test_a_syntax_error_is_named_also_through_an_active_session(spark) -> None:  # type: ignore[no-untyped-def]
    assert spark.sparkContext is not None  # the session is active in this process
    with pytest.raises(ExpressionSyntaxError, match="syntax error at or near ';'"):
        parse_expression_tree("event_type = 'view'; DROP TABLE x")
    kinds = [node.kind for node in parse_expression_tree("amount > 1")]
    assert kinds and kinds[0] == "GreaterThan"
