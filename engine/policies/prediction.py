"""What a change of instances will do, predicted from the load model of measured epochs.

The run page paints its bottleneck from the load model (``engine.policies.load``): demanded
rates against each unit's capacity (DS2's true rate times instances). A preview says what a
change does in the same terms, so that the two agree: each unit's capacity scales with the
instances of the operator that leads it (its capacity per instance is measured and assumed to
hold), its utilisation is the same demand over that capacity, congestion and ETP follow by the
same rules, and so do the run's capacity and the time its backlog takes to drain.

The rates the Stela policies (scale-out, scale-in, ETP) plan with come from the same model
(``load_rates``): an operator's input is its demanded rate and its processing rate its unit's
capacity, so "congested" means one thing on the graph, in a preview and in a policy's answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.dag.model import JobGraph
from engine.policies.etp import DEFAULT_THRESHOLD, compute_etp
from engine.policies.load import Epoch, LoadModel, UnitLoad, load_model
from engine.policies.rates import OperatorRates, Rates


@dataclass(frozen=True)
class LoadOutlook:
    """The run under one configuration: congestion, ETP, capacity and backlog drain."""

    etp: dict[str, float]
    congested: list[str]
    bottleneck: str | None
    offered_rate: float
    capacity_rate: float | None
    backlog: int
    drain_s: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (rates in rows/s, the drain in seconds; None: it never drains)."""
        return {"etp": {op: round(v, 4) for op, v in self.etp.items()},
                "congested": list(self.congested), "bottleneck": self.bottleneck,
                "offered_rate": round(self.offered_rate, 1),
                "capacity_rate": None if self.capacity_rate is None
                else round(self.capacity_rate, 1),
                "backlog": self.backlog,
                "drain_s": None if self.drain_s is None else round(self.drain_s, 1)}


def predict_change(graph: JobGraph, epochs: Sequence[Epoch], parallelism: Mapping[str, int],
                   threshold: float = DEFAULT_THRESHOLD) -> dict[str, LoadOutlook]:
    """``{"now", "after"}``: the run as measured over ``epochs`` (oldest first, all at the
    current configuration) and as it would run with ``parallelism`` (operator -> instances)."""
    model = load_model(graph, epochs, threshold=threshold)
    units = {unit_id: replace(unit, instances=parallelism.get(unit.leader, unit.instances))
             for unit_id, unit in model.units.items()}
    return {"now": _outlook(graph, model, model.units, threshold, rejudge=False),
            "after": _outlook(graph, model, units, threshold, rejudge=True)}


def load_rates(graph: JobGraph, epochs: Sequence[Epoch],
               threshold: float = DEFAULT_THRESHOLD) -> Rates:
    """Rates for the Stela policies from the load model: demanded input and output, and the
    capacity of the unit an operator runs in as its processing rate (an operator in no unit,
    a sink fused nowhere, is taken to keep up)."""
    model = load_model(graph, epochs, threshold=threshold)
    rates = Rates()
    for op_id in graph.operator_ids():
        if op_id in model.sources:
            rates[op_id] = OperatorRates(None, None, model.demand_out[op_id])
            continue
        unit = model.unit_of(op_id)
        demand = model.demand_in[op_id]
        capacity = unit.capacity if unit is not None and unit.capacity > 0 else demand
        if unit is not None and unit.congested and capacity * threshold >= demand:
            # Congested as the chain's bottleneck (the units' summed utilisation is over
            # the threshold): the policies see it as the graph shows it.
            capacity = demand / threshold * 0.999
        rates[op_id] = OperatorRates(demand, capacity, model.demand_out[op_id])
    return rates


def _outlook(graph: JobGraph, model: LoadModel, units: Mapping[str, UnitLoad],
             threshold: float, *, rejudge: bool) -> LoadOutlook:
    if rejudge:
        units = _judged(units, threshold)
    blocked = [op for unit in units.values() if unit.congested for op in unit.operators]
    silent = all(model.demand_out[s] <= 0 for s in graph.sinks())
    rates = {op: OperatorRates(model.demand_in.get(op), None,
                               1.0 if silent and op in graph.sinks() else model.demand_out[op])
             for op in graph.operator_ids()}
    etp = compute_etp(graph, rates, threshold, congested=blocked)
    worst = sorted((u for u in units.values() if u.congested), key=lambda u: -u.utilisation)
    target = sum(trend.target_rate for trend in model.sources.values())
    offered = sum(trend.offered_rate for trend in model.sources.values())
    backlog = sum(trend.backlog for trend in model.sources.values())
    busy = sum(u.utilisation for u in units.values())
    # The units run one after another in an epoch: the sources' rows are processed at most
    # as fast as the demanded rate over the units' summed utilisation.
    capacity = target / busy if busy > 0 else None
    return LoadOutlook(etp=etp.etp, congested=etp.congested,
                       bottleneck=worst[0].unit_id if worst else None, offered_rate=offered,
                       capacity_rate=capacity, backlog=backlog,
                       drain_s=_drain_s(backlog, offered, capacity))


def _judged(units: Mapping[str, UnitLoad], threshold: float) -> dict[str, UnitLoad]:
    """Congestion judged again at the units' instances, by the load model's two rules."""
    judged = {unit_id: replace(u, congested=u.capacity > 0
                               and u.demand_rate > threshold * u.capacity)
              for unit_id, u in units.items()}
    if judged and sum(u.utilisation for u in judged.values()) > threshold:
        worst = max(judged.values(), key=lambda u: u.utilisation)
        if worst.capacity > 0:
            judged[worst.unit_id] = replace(worst, congested=True)
    return judged


def _drain_s(backlog: int, offered: float, capacity: float | None) -> float | None:
    """Seconds until the backlog is gone at ``capacity`` while ``offered`` keeps arriving;
    None when it never drains."""
    if backlog <= 0:
        return 0.0
    if capacity is None or capacity <= offered:
        return None
    return backlog / (capacity - offered)
