"""State kind and parallelism limits of one operator, as the planner and policies see them."""

from __future__ import annotations

from engine.dag.catalog import OPERATOR_TYPES, StateKind
from engine.dag.model import JobGraph, Operator


def state_kind_of(op: Operator) -> StateKind:
    """The operator's state kind; an unknown type counts as global (unsafe to split)."""
    op_type = OPERATOR_TYPES.get(op.type)
    if op_type is None:
        return "global"
    if op_type.key_param is not None:
        key = op.params.get(op_type.key_param, [])
        # No key means one group holding all rows: its state cannot be split.
        if isinstance(key, (list, tuple)) and len(key) == 0:
            return "global"
    return op_type.state_kind


def key_columns_of(op: Operator) -> tuple[str, ...]:
    """The columns the operator's state is partitioned by (empty if not keyed)."""
    op_type = OPERATOR_TYPES.get(op.type)
    if op_type is None or op_type.key_param is None:
        return ()
    key = op.params.get(op_type.key_param)
    if not isinstance(key, (list, tuple)):
        return ()
    return tuple(str(k) for k in key)


def pinned_reason(op: Operator) -> str | None:
    """Why the operator must run as exactly one instance, or None if it may scale."""
    if op.type not in OPERATOR_TYPES:
        return f"unknown operator type {op.type!r}: its state cannot be partitioned safely"
    if state_kind_of(op) == "global":
        return "global state (no key to partition it by): it must run as one instance"
    return None


def max_parallelism(graph: JobGraph, op: Operator) -> int:
    """The largest parallelism the operator may take: 1 if pinned, else key_groups."""
    return 1 if pinned_reason(op) is not None else graph.key_groups


CLOCK_SOURCES = ("source.generator", "source.rate")
"""Sources whose rows each epoch's plan decides (a row-id range over as many Spark
partitions as the source's parallelism, which can change live like any operator's)."""


def fixed_parallelism_reason(op_type: str) -> str:
    """Why an operator's parallelism cannot change live (sinks and Spark-read sources)."""
    if op_type.startswith("source."):
        return "its partitions are those Spark reads its data in"
    return "it writes in the stage that feeds it, whose parallelism it follows"
