"""Stateless operators as Spark SQL expressions on a micro-batch DataFrame."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from engine.runtime.errors import CommandRejected, UnsupportedJobError

STATELESS_TYPES = ("filter", "map")


def apply_stateless(op_type: str, params: Mapping[str, Any], df: DataFrame) -> DataFrame:
    """``df`` transformed by a filter (``condition``) or map (``columns``: name -> expr)."""
    if op_type == "filter":
        return df.where(F.expr(str(params["condition"])))
    if op_type == "map":
        columns = params.get("columns") or {}
        return df.withColumns({str(name): F.expr(str(expr)) for name, expr in columns.items()})
    raise UnsupportedJobError(f"operator type {op_type!r} is not a stateless SQL operator")


def check_stateless_params(op_type: str, params: Mapping[str, Any], df: DataFrame) -> None:
    """Raises CommandRejected unless the params analyse against ``df``'s schema.

    Analysis only (``limit(0)`` and ``schema``): no data is read.
    """
    try:
        apply_stateless(op_type, params, df.limit(0)).schema  # noqa: B018  # forces analysis
    except (PySparkException, KeyError, TypeError, ValueError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CommandRejected(f"invalid params for {op_type}: {first_line}") from exc
