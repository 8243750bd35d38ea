"""Scaling policies on measured rates: congestion and ETP (Stela), Stela scale-out and
scale-in, and DS2's recommended parallelism."""

from engine.policies.ds2 import recommend_parallelism
from engine.policies.etp import (
    DEFAULT_THRESHOLD,
    EtpResult,
    compute_etp,
    congested_operators,
    is_congested,
)
from engine.policies.rates import OperatorRates, Rates, RatesView, parse_rates
from engine.policies.stela_in import Placement, ScaleInResult, parse_placement, plan_scale_in
from engine.policies.stela_out import ScaleOutResult, plan_scale_out

__all__ = [
    "DEFAULT_THRESHOLD",
    "EtpResult",
    "OperatorRates",
    "Placement",
    "Rates",
    "RatesView",
    "ScaleInResult",
    "ScaleOutResult",
    "compute_etp",
    "congested_operators",
    "is_congested",
    "parse_placement",
    "parse_rates",
    "plan_scale_in",
    "plan_scale_out",
    "recommend_parallelism",
]
