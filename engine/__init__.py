"""streamscale engine: job graphs, planning, VSN mapping, scaling policies, migration.

Pure Python except the Spark runtime (``engine.runtime``), which is not imported here.

- ``engine.dag``: the DAG document model, operator catalog and validation;
- ``engine.planner``: auto-parallelization into regions, physical plans and plan diffs;
- ``engine.mapping``: key groups (Spark's xxhash64), key-group assignments and diffs;
- ``engine.policies``: congestion and ETP, Stela scale-out/scale-in, DS2;
- ``engine.migration``: Megaphone-style stepwise key-group migration.
"""

from engine.dag import (
    OPERATOR_TYPES,
    Edge,
    JobGraph,
    Operator,
    OperatorType,
    output_columns,
    parse_job_graph,
)
from engine.dag.expressions import Parser, use_parser_loader
from engine.errors import (
    DagValidationError,
    EngineError,
    MappingError,
    PlacementError,
    PolicyError,
    Problem,
    ProblemsError,
    RatesError,
)
from engine.mapping import (
    Assignment,
    AssignmentDiff,
    Move,
    apply_diff,
    assignment_diff,
    balanced_assignment,
    key_group_of,
    weighted_assignment,
)
from engine.migration import MigrationStep, plan_migration
from engine.planner import PhysicalPlan, PlanDiff, Region, diff_plans, plan_job
from engine.policies import (
    EtpResult,
    OperatorRates,
    Rates,
    ScaleInResult,
    ScaleOutResult,
    compute_etp,
    parse_placement,
    parse_rates,
    plan_scale_in,
    plan_scale_out,
    recommend_parallelism,
)


def _spark_parser() -> Parser:
    """Spark's SQL parser, which expressions are checked with: the runtime's, imported on
    first use (it starts a JVM)."""
    from engine.runtime.spark.sql_parser import parse_expression_tree

    return parse_expression_tree


use_parser_loader(_spark_parser)

__all__ = [
    "OPERATOR_TYPES",
    "Assignment",
    "AssignmentDiff",
    "DagValidationError",
    "Edge",
    "EngineError",
    "EtpResult",
    "JobGraph",
    "MappingError",
    "MigrationStep",
    "Move",
    "Operator",
    "OperatorRates",
    "OperatorType",
    "PhysicalPlan",
    "PlacementError",
    "PlanDiff",
    "PolicyError",
    "Problem",
    "ProblemsError",
    "Rates",
    "RatesError",
    "Region",
    "ScaleInResult",
    "ScaleOutResult",
    "apply_diff",
    "assignment_diff",
    "balanced_assignment",
    "compute_etp",
    "diff_plans",
    "key_group_of",
    "output_columns",
    "parse_job_graph",
    "parse_placement",
    "parse_rates",
    "plan_job",
    "plan_migration",
    "plan_scale_in",
    "plan_scale_out",
    "recommend_parallelism",
    "weighted_assignment",
]
