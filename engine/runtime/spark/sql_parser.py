"""Spark's own SQL expression parser, reachable without a SparkContext.

Validation runs in processes that never run Spark (the web server, the CLI), so this keeps
one small JVM per process, started on first use, and asks Catalyst's parser
for the unresolved tree of each expression: no analysis, no data, nothing executed. A process
that already runs Spark (a run's driver) uses its SparkContext's JVM instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from typing import Any

from engine.dag.expressions import (
    ExpressionNode,
    ExpressionParserUnavailable,
    ExpressionSyntaxError,
)

_lock = threading.Lock()
_gateway: Any = None
_gateway_pid: int | None = None


def parse_expression_tree(text: str) -> tuple[ExpressionNode, ...]:
    """The nodes of ``text``'s unresolved expression tree in pre-order, or
    ExpressionSyntaxError with Spark's message."""
    from py4j.protocol import Py4JError, Py4JJavaError
    from pyspark.errors.exceptions.captured import CapturedException

    try:
        parser = _catalyst_parser()
        tree = parser.parseExpression(text)
        return tuple(_nodes(json.loads(tree.toJSON())))
    except (Py4JJavaError, CapturedException) as error:
        # Through an active SparkContext, pyspark turns the JVM's error into its own class.
        raise ExpressionSyntaxError(_parse_message(error)) from None
    except (Py4JError, OSError, RuntimeError) as error:
        _forget_gateway()
        raise ExpressionParserUnavailable(
            f"Spark's SQL parser is unavailable, so expressions cannot be checked: {error}"
        ) from None


def _forget_gateway() -> None:
    global _gateway
    with _lock:
        _gateway = None


def _nodes(raw: list[dict[str, Any]]) -> list[ExpressionNode]:
    nodes = []
    for item in raw:
        kind = str(item.get("class", "")).rsplit(".", 1)[-1].split("$", 1)[0]
        name = item.get("nameParts")
        parts = tuple(p.strip() for p in name[1:-1].split(",")) if isinstance(name, str) else ()
        value = item.get("value") if kind == "Literal" else None
        nodes.append(ExpressionNode(kind, int(item.get("num-children", 0)), parts,
                                    None if value is None else str(value)))
    return nodes


def _parse_message(error: Any) -> str:
    java = getattr(error, "java_exception", None)
    text = str(java.getMessage()) if java is not None else str(error)
    lines = [line.strip() for line in text.splitlines()]
    first = next((line for line in lines if line), "syntax error")
    first = first.split(" SQLSTATE:", 1)[0].rstrip(". ")
    if first.startswith("[") and "] " in first:
        first = first.split("] ", 1)[1]
    return first[0].lower() + first[1:] if first else "syntax error"


def _catalyst_parser() -> Any:
    jvm = _jvm()
    package = jvm.org.apache.spark.sql.catalyst.parser
    return getattr(getattr(package, "CatalystSqlParser$"), "MODULE$")


def _jvm() -> Any:
    from pyspark import SparkContext

    if SparkContext._jvm is not None and SparkContext._active_spark_context is not None:
        return SparkContext._jvm
    global _gateway, _gateway_pid
    with _lock:
        # A forked child (a Celery worker) must not share its parent's socket to the JVM.
        if _gateway is None or _gateway_pid != os.getpid():
            _gateway, _gateway_pid = _launch(), os.getpid()
        return _gateway.jvm


def _launch() -> Any:
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    from engine.runtime.spark.class_archive import driver_java_options

    conf = SparkConf(loadDefaults=False).set("spark.driver.memory", "256m") \
        .set("spark.driver.defaultJavaOptions", driver_java_options())
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    return launch_gateway(conf, popen_kwargs=quiet)
