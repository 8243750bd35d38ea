"""Validates a logic change (new params) against the running job before installing it.

Stateless operators: the new expressions must analyse against the operator's input
schema (no data read). Window aggregates, dedupes and joins: the change must keep
the stored state meaningful (same key, window shape and partials; a join's bound may only
narrow); e.g. the watermark may change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

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
    inputs = _Inputs(batch, sources or {})

    def check(op_id: str, params: dict[str, Any]) -> None:
        op = graph.operator(op_id)
        if op.type in STATELESS_TYPES:
            check_stateless_params(op.type, params, _input_frame(graph, config, op_id, inputs))
        elif op.type in KEYED_SPECS:
            _check_keyed(op_id, op.type, config[op_id].params, params)
        else:
            raise CommandRejected(f"{op_id!r} ({op.type}): logic changes need a restart")

    return check


def _check_keyed(
    op_id: str, op_type: str, old_params: dict[str, Any], new_params: dict[str, Any]
) -> None:
    reason = logic_change_refused(op_type, op_id, old_params, new_params)
    if reason is not None:
        raise CommandRejected(f"refused: {reason}")


class _Inputs(NamedTuple):
    batch: DataFrame
    sources: Mapping[str, DataFrame]


def _input_frame(graph: JobGraph, config: RunConfig, op_id: str, batch: _Inputs) -> DataFrame:
    frames = [_frame(graph, config, parent, batch) for parent in graph.parents(op_id)]
    combined = frames[0]
    for other in frames[1:]:
        combined = combined.unionByName(other)
    return combined


def _frame(graph: JobGraph, config: RunConfig, op_id: str, inputs: _Inputs) -> DataFrame:
    op = graph.operator(op_id)
    given, batch = inputs, inputs.batch
    if not graph.parents(op_id):
        return given.sources.get(op_id, batch).limit(0)
    if op.type == "join":
        left, right = (_frame(graph, config, p, given) for p in graph.parents(op_id))
        join = parse_join_spec(op_id, config[op_id].params)
        _, _, struct = join_input(join, left, right, graph.key_groups)
        pair = T.StructType([f for f in struct.fields if f.name != REPORT])
        return batch.sparkSession.createDataFrame([], pair)
    rows = _input_frame(graph, config, op_id, given)
    if op.type in STATELESS_TYPES:
        return apply_stateless(op.type, config[op_id].params, rows)
    if op.type == "window_aggregate":
        spec = parse_window_spec(op_id, config[op_id].params)
        struct = output_struct(spec, stage_input(spec, rows, graph.key_groups))
        empty = batch.sparkSession.createDataFrame([], struct)
        return empty.select(
            *spec.keys,
            F.timestamp_micros(WINDOW_START).alias(WINDOW_START),
            F.timestamp_micros(WINDOW_END).alias(WINDOW_END),
            *[a.name for a in spec.aggregates],
        )
    return rows  # dedupe keeps its input's columns
