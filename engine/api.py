"""The engine as the control plane calls it: documents, plans, policies and the commands
that reach a running job. No Spark is imported here; ``engine.runtime.api`` starts and
stops runs, in the driver process.

Everything the web application uses of the engine is named here (``tests/test_architecture``
holds it to that), so the engine's inside can move without the web application noticing.
"""

from __future__ import annotations

from engine.dag import (
    BROKER_SOURCE_TYPES,
    OPERATOR_TYPES,
    JobGraph,
    known_output_columns,
    max_parallelism,
    output_columns,
    parse_job_graph,
    pinned_reason,
    state_kind_of,
    stored_job_graph,
)
from engine.dag.document import MAX_KEY_GROUPS, MAX_NAME_LENGTH, document_in_order
from engine.dag.expressions import ExpressionParserUnavailable, parser_warm, warm_up_parser
from engine.dag.secrets import masked_document, unmasked_document
from engine.dag.sinks import STAGING_SUFFIX, SinkTarget, reserved_target_reason, sink_targets
from engine.errors import DagValidationError, EngineError, ValidationBudgetExceeded
from engine.mapping import weighted_assignment
from engine.planner import diff_plans, plan_job, ranges_moves_detail
from engine.policies import compute_etp, parse_rates, plan_scale_out, recommend_parallelism
from engine.policies.autoscale import (
    AutoscaleSettings,
    LastChange,
    autoscale_decide,
    parallelism_limits,
)
from engine.policies.instances_in import plan_scale_in_instances
from engine.policies.prediction import load_rates, predict_change
from engine.runtime.control.channel import RedisControlChannel
from engine.runtime.control.messages import Ack, CommandRequest
from engine.runtime.control.run_config import describe, initial_config
from engine.runtime.driver.kept_state import discard_state, kept_state
from engine.runtime.errors import RunFailure, failure_of, failure_summary
from engine.runtime.operators.changes import logic_change_refused
from engine.runtime.state import StoreSpec

__all__ = [
    "MAX_KEY_GROUPS",
    "MAX_NAME_LENGTH",
    "BROKER_SOURCE_TYPES",
    "OPERATOR_TYPES",
    "STAGING_SUFFIX",
    "Ack",
    "AutoscaleSettings",
    "CommandRequest",
    "DagValidationError",
    "EngineError",
    "ExpressionParserUnavailable",
    "JobGraph",
    "LastChange",
    "RedisControlChannel",
    "RunFailure",
    "SinkTarget",
    "StoreSpec",
    "ValidationBudgetExceeded",
    "autoscale_decide",
    "compute_etp",
    "describe",
    "diff_plans",
    "discard_state",
    "document_in_order",
    "failure_of",
    "failure_summary",
    "initial_config",
    "kept_state",
    "logic_change_refused",
    "known_output_columns",
    "load_rates",
    "masked_document",
    "max_parallelism",
    "output_columns",
    "parallelism_limits",
    "parse_job_graph",
    "parse_rates",
    "parser_warm",
    "pinned_reason",
    "plan_job",
    "plan_scale_in_instances",
    "plan_scale_out",
    "predict_change",
    "recommend_parallelism",
    "ranges_moves_detail",
    "reserved_target_reason",
    "sink_targets",
    "state_kind_of",
    "stored_job_graph",
    "unmasked_document",
    "warm_up_parser",
    "weighted_assignment",
]
