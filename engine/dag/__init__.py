"""Job graph model: the DAG document, its operator catalog, validation and schemas.

>>> graph = parse_job_graph(document)        # raises DagValidationError with every problem
>>> graph.topological_order(), output_columns(graph)
"""

from engine.dag.catalog import BROKER_SOURCE_TYPES, OPERATOR_TYPES, OperatorType, ParamSpec
from engine.dag.model import DEFAULT_KEY_GROUPS, Edge, JobGraph, Operator
from engine.dag.params import params_with_defaults
from engine.dag.schema import output_columns
from engine.dag.state import (
    CLOCK_SOURCES,
    fixed_parallelism_reason,
    key_columns_of,
    max_parallelism,
    pinned_reason,
    state_kind_of,
)
from engine.dag.syntax import interval_seconds
from engine.dag.validate import (
    known_output_columns,
    parse_job_graph,
    planning_job_graph,
    stored_job_graph,
    validate_graph,
)

__all__ = [
    "BROKER_SOURCE_TYPES",
    "CLOCK_SOURCES",
    "fixed_parallelism_reason",
    "DEFAULT_KEY_GROUPS",
    "OPERATOR_TYPES",
    "Edge",
    "JobGraph",
    "Operator",
    "OperatorType",
    "ParamSpec",
    "interval_seconds",
    "key_columns_of",
    "known_output_columns",
    "max_parallelism",
    "output_columns",
    "params_with_defaults",
    "parse_job_graph",
    "planning_job_graph",
    "pinned_reason",
    "state_kind_of",
    "stored_job_graph",
    "validate_graph",
]
