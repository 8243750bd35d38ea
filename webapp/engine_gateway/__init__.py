"""The one place the web application calls the engine. Plain data crosses: dicts, JSON and the
engine's frozen message types (`Ack`).

Engine errors become `ServiceError`s here, so views and services see one error family. By
concern: `documents` (validation, plans, limits, the catalog), `plans` (reconfigurations
planned against a running document and the commands that carry them), `rates` (ETP, DS2 and
the autoscaler on measured rates) and `runs` (the control channel and the driver's loop).
"""

from webapp.engine_gateway.documents import (
    STAGING_SUFFIX,
    ParserUnavailable,
    SinkTarget,
    dag_assignment,
    dag_check,
    dag_headroom,
    dag_limits,
    dag_normalized,
    dag_parallelism,
    dag_problems,
    dag_shown,
    dag_sink_targets,
    dag_state_kinds,
    dag_with_secrets,
    document_limits,
    operator_catalog,
    parser_warm,
    prepare,
    sink_target_reserved,
)
from webapp.engine_gateway.plans import (
    LOGIC_FIXED,
    commands_between,
    plan_acknowledged,
    plan_check_rebalance,
    plan_diff,
    plan_logic,
    plan_rescale,
    plan_scale_in_by_instances,
    plan_scale_out_instances,
    plan_upgrade_check,
    rebalance_command,
    rebalance_weighted_owners,
)
from webapp.engine_gateway.rates import (
    load_decide,
    rates_etp,
    rates_recommend,
)
from webapp.engine_gateway.runs import (
    CONTROL_PREFIX,
    Ack,
    control_send,
    control_stop,
    failure_of_start,
    run_driver,
    state_discard,
    state_kept,
)

__all__ = [
    "CONTROL_PREFIX",
    "Ack",
    "LOGIC_FIXED",
    "STAGING_SUFFIX",
    "ParserUnavailable",
    "SinkTarget",
    "commands_between",
    "control_send",
    "control_stop",
    "dag_assignment",
    "dag_check",
    "dag_headroom",
    "dag_limits",
    "dag_normalized",
    "dag_parallelism",
    "dag_problems",
    "dag_shown",
    "dag_sink_targets",
    "dag_state_kinds",
    "dag_with_secrets",
    "document_limits",
    "failure_of_start",
    "load_decide",
    "operator_catalog",
    "parser_warm",
    "plan_acknowledged",
    "plan_check_rebalance",
    "plan_diff",
    "plan_logic",
    "plan_rescale",
    "plan_scale_in_by_instances",
    "plan_scale_out_instances",
    "plan_upgrade_check",
    "prepare",
    "rates_etp",
    "rates_recommend",
    "rebalance_command",
    "rebalance_weighted_owners",
    "run_driver",
    "sink_target_reserved",
    "state_discard",
    "state_kept",
]
