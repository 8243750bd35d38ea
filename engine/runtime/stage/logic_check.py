"""Validates a logic change (new params) against the running job before installing it:
a stateless operator's new expressions must analyse against its input schema (no data
read), a keyed operator's must keep its stored state meaningful (``logic_change_refused``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.dag import JobGraph
from engine.runtime.control.run_config import LogicCheck, RunConfig
from engine.runtime.errors import CommandRejected
from engine.runtime.operators.changes import KEYED_SPECS, logic_change_refused
from engine.runtime.operators.join import parse_join_spec
from engine.runtime.operators.window_spec import WINDOW_END, WINDOW_START, parse_window_spec
from engine.runtime.stage.stateless import STATELESS_TYPES, apply_stateless, check_stateless_params
from engine.runtime.stage.vsn_stage import join_input, output_struct, stage_input
from engine.runtime.stage.vsn_worker import REPORT


def logic_checker(
    graph: JobGraph,
    config: RunConfig,
    batch: DataFrame,
    sources: Mapping[str, DataFrame] | None = None,
) -> LogicCheck:
    """A LogicCheck bound to this epoch's input (for schemas) and current config;
    ``sources`` gives the rows of sources that are not read from ``batch``."""
    spark = batch.sparkSession

    def input_of(op_id: str) -> DataFrame:
        return reduce(DataFrame.unionByName, [output_of(p) for p in graph.parents(op_id)])

    def output_of(op_id: str) -> DataFrame:
        """The operator's rows, none of them: its output schema, no data read."""
        op, params = graph.operator(op_id), config[op_id].params
        if not graph.parents(op_id):
            return (sources or {}).get(op_id, batch).limit(0)
        if op.type == "join":
            left, right = (output_of(p) for p in graph.parents(op_id))
            _, _, struct = join_input(parse_join_spec(op_id, params), left, right,
                                      graph.key_groups)
            return spark.createDataFrame(
                [], T.StructType([f for f in struct.fields if f.name != REPORT]))
        rows = input_of(op_id)
        if op.type in STATELESS_TYPES:
            return apply_stateless(op.type, params, rows)
        if op.type == "window_aggregate":
            spec = parse_window_spec(op_id, params)
            struct = output_struct(spec, stage_input(spec, rows, graph.key_groups))
            return spark.createDataFrame([], struct).select(
                *spec.keys,
                F.timestamp_micros(WINDOW_START).alias(WINDOW_START),
                F.timestamp_micros(WINDOW_END).alias(WINDOW_END),
                *[a.name for a in spec.aggregates],
            )
        return rows  # dedupe keeps its input's columns

    def check(op_id: str, params: dict[str, Any]) -> None:
        op = graph.operator(op_id)
        if op.type in STATELESS_TYPES:
            check_stateless_params(op.type, params, input_of(op_id))
        elif op.type in KEYED_SPECS:
            reason = logic_change_refused(op.type, op_id, config[op_id].params, params)
            if reason is not None:
                raise CommandRejected(f"refused: {reason}")
        else:
            raise CommandRejected(f"{op_id!r} ({op.type}): logic changes need a restart")

    return check
