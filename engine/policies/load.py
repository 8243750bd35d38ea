"""Load judged against what is offered (DESIGN.md section 6), from measured epochs.

A *unit* is what has a capacity of its own: a keyed operator (its VSN instances time
themselves) or a region of stateless operators fused into Spark stages (timed as those
stages' tasks). Over a window of epochs:

- each source's target rate is its offered rate (consumed plus backlog growth) plus
  ``backlog / drain_s``, enough to drain what is waiting within ``drain_s``;
- the target is carried downstream by each operator's measured selectivity, giving every
  operator's demanded input rate;
- a unit's capacity is DS2's true rate: rows per *busy* second of one instance, times its
  instances; its utilisation is demanded rate over capacity;
- an epoch runs its units one after another (a stage waits for the shuffle before it), so
  the run's operators need the *sum* of their units' utilisations of every second: the
  run's busy utilisation. A unit is congested when its own utilisation passes
  ``threshold``, or when the busy utilisation does and the unit takes the largest share of
  it (the bottleneck of the chain). The share of the epochs' wall time no unit accounts for
  (driver, scheduling, and other processes holding the cores) is shown beside it but never
  makes a unit congested: more instances of an operator do not shorten it;
- ETP follows (Stela) with the sinks' shares taken from their demanded rates.

Input is the per-epoch metrics the runtime publishes (``engine.runtime.driver.metrics``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.dag.model import JobGraph
from engine.policies.etp import DEFAULT_THRESHOLD, compute_etp
from engine.policies.rates import OperatorRates

DEFAULT_DRAIN_S = 30.0

Epoch = Mapping[str, Any]


@dataclass(frozen=True)
class UnitLoad:
    """One unit over the window: demanded input rate against measured capacity."""

    unit_id: str
    operators: tuple[str, ...]
    instances: int
    demand_rate: float
    capacity_per_instance: float
    congested: bool

    @property
    def leader(self) -> str:
        """The operator whose parallelism sets the unit's instances: its first."""
        return self.operators[0]

    @property
    def capacity(self) -> float:
        """Rows per second all instances process when busy all the time."""
        return self.capacity_per_instance * self.instances

    @property
    def utilisation(self) -> float:
        """Demanded over capacity (above 1: the unit cannot keep up)."""
        return self.demand_rate / self.capacity if self.capacity > 0 else 0.0

    def needed_instances(self, utilisation: float = 1.0) -> int:
        """DS2: instances to process the demanded rate at ``utilisation`` of capacity."""
        if self.capacity_per_instance <= 0:
            return self.instances
        return max(1, math.ceil(self.demand_rate / (self.capacity_per_instance * utilisation)
                                - 1e-9))

    def to_dict(self) -> dict[str, Any]:
        """The figures an audit entry or a page shows."""
        return {
            "operators": list(self.operators), "leader": self.leader,
            "instances": self.instances, "demand_rate": round(self.demand_rate, 1),
            "capacity_per_instance": round(self.capacity_per_instance, 1),
            "capacity": round(self.capacity, 1), "utilisation": round(self.utilisation, 3),
            "congested": self.congested,
        }


@dataclass(frozen=True)
class SourceTrend:
    """One source over the window: offered rate, backlog now and its growth, target."""

    offered_rate: float
    consumed_rate: float
    backlog: int
    growth_per_s: float
    target_rate: float
    epoch_offered: float = 0.0  # rows offered per epoch: what arrives while one runs

    @property
    def in_flight(self) -> bool:
        """The backlog is no more than what arrives during one epoch: the run keeps up."""
        return self.backlog <= self.epoch_offered

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"offered_rate": round(self.offered_rate, 1),
                "consumed_rate": round(self.consumed_rate, 1), "backlog": self.backlog,
                "backlog_growth_per_s": round(self.growth_per_s, 1),
                "target_rate": round(self.target_rate, 1)}


@dataclass(frozen=True)
class LoadModel:
    """Demanded rates, unit loads, congestion and ETP of a window of epochs."""

    demand_in: dict[str, float]
    demand_out: dict[str, float]
    units: dict[str, UnitLoad]
    sources: dict[str, SourceTrend]
    etp: dict[str, float]
    overhead_share: float = 0.0

    @property
    def busy_utilisation(self) -> float:
        """Seconds the run's operators are busy per second at the demanded load, from
        their own measured busy time: the units' utilisations (they run in series)."""
        return sum(u.utilisation for u in self.units.values())

    @property
    def run_utilisation(self) -> float:
        """Seconds of the epochs' wall time the demanded load takes per second: the busy
        utilisation plus the share no unit accounts for (shown, not judged)."""
        return self.busy_utilisation + self.overhead_share

    def congested_units(self) -> list[UnitLoad]:
        """Congested units, most overloaded first."""
        found = [u for u in self.units.values() if u.congested]
        return sorted(found, key=lambda u: -u.utilisation)

    def unit_of(self, op_id: str) -> UnitLoad | None:
        """The unit an operator's capacity belongs to (None: sinks fused nowhere)."""
        return next((u for u in self.units.values() if op_id in u.operators), None)


def load_model(
    graph: JobGraph,
    epochs: Sequence[Epoch],
    drain_s: float = DEFAULT_DRAIN_S,
    threshold: float = DEFAULT_THRESHOLD,
) -> LoadModel:
    """The load model of ``epochs`` (oldest first, all at one configuration)."""
    sources = {s: source_trend(epochs, s, drain_s) for s in graph.sources()}
    demand_in, demand_out = _carry(graph, epochs, sources)
    units = {}
    for unit_id, unit in _units(epochs[-1]).items():
        rows, busy_ms = _window_work(epochs, unit_id)
        per_instance = rows / (busy_ms / 1000.0) if busy_ms > 0 else 0.0
        entry = unit["operators"][0]
        demand = demand_out[entry] if entry in sources else demand_in[entry]
        capacity = per_instance * unit["instances"]
        congested = capacity > 0 and demand > threshold * capacity
        units[unit_id] = UnitLoad(unit_id, tuple(unit["operators"]), unit["instances"],
                                  demand, per_instance, congested)
    overhead = overhead_share(epochs, units)
    if units and sum(u.utilisation for u in units.values()) > threshold:
        worst = max(units.values(), key=lambda u: u.utilisation)
        if worst.capacity > 0:
            units[worst.unit_id] = replace(worst, congested=True)
    blocked = [op for u in units.values() if u.congested for op in u.operators]
    # Windows emit in bursts: when no sink is due output in the window, each counts alike.
    silent = all(demand_out[s] <= 0 for s in graph.sinks())
    rates = {op: OperatorRates(demand_in.get(op), None,
                               1.0 if silent and op in graph.sinks() else demand_out[op])
             for op in graph.operator_ids()}
    etp = compute_etp(graph, rates, threshold, congested=blocked).etp
    return LoadModel(demand_in, demand_out, units, sources, etp, overhead)


def overhead_share(epochs: Sequence[Epoch], units: Mapping[str, UnitLoad]) -> float:
    """The share of wall time the epochs spent outside every unit's measured work: each
    epoch's duration less its units' stage times (a stage takes as long as its busiest
    instance), over the wall time the epochs took (the time between epoch starts, or the
    epoch's own duration where it ran longer than that)."""
    spent, wall = 0.0, 0.0
    for epoch in epochs:
        batch = epoch.get("batch_duration_ms") or 0.0
        staged = 0.0
        for unit_id in units:
            found = (epoch.get("regions") or {}).get(unit_id) or epoch["operators"].get(unit_id)
            if found is not None and found.get("busy_ms"):
                staged += max(found["busy_ms"])
        spent += max(0.0, batch - staged)
        wall += max(epoch.get("interval_ms") or 0.0, batch, 1.0)
    return spent / wall if wall > 0 else 0.0


def source_trend(epochs: Sequence[Epoch], source: str, drain_s: float) -> SourceTrend:
    """Offered and consumed rates over the window, the last backlog, its growth, and the
    target rate in rows/s (a source counted in other units is converted by its rows per
    unit consumed)."""
    found = [(e.get("sources") or {}).get(source) for e in epochs]
    rows = sum((e["operators"].get(source) or {}).get("rows_out") or 0 for e in epochs)
    figures = [f for f in found if f is not None]
    if len(figures) < len(found):  # not metered: its rows over the epochs' intervals
        rate = rows / (sum(max(e.get("interval_ms") or 0.0, 1.0) for e in epochs) / 1000.0)
        return SourceTrend(rate, rate, 0, 0.0, rate, rows / len(epochs))
    # A source is read at the ends of epochs: its counts cover the time between readings,
    # not between epoch starts (they differ by the change in the epochs' durations).
    periods = [max(f.get("period_ms") or e.get("interval_ms") or 0.0, 1.0)
               for f, e in zip(figures, epochs, strict=True)]
    seconds = sum(periods) / 1000.0
    offered = sum(f["offered"] for f in figures) / seconds
    consumed = sum(f["consumed"] for f in figures) / seconds
    backlog = int(figures[-1]["backlog"])
    growth = sum(f["backlog_growth_per_s"] * p
                 for f, p in zip(figures, periods, strict=True)) / 1000.0 / seconds
    target = offered + backlog / max(drain_s, 1e-3)
    if figures[-1].get("unit", "rows") != "rows":
        target = rows / seconds * (target / consumed) if consumed > 0 else rows / seconds
    epoch_offered = sum(f["offered"] for f in figures) / len(figures)
    return SourceTrend(offered, consumed, backlog, growth, target, epoch_offered)


def _carry(
    graph: JobGraph, epochs: Sequence[Epoch], sources: Mapping[str, SourceTrend]
) -> tuple[dict[str, float], dict[str, float]]:
    """Demanded input and output rate of every operator, in topological order."""
    demand_in: dict[str, float] = {}
    demand_out: dict[str, float] = {}
    for op_id in graph.topological_order():
        if op_id in sources:
            demand_out[op_id] = sources[op_id].target_rate
            continue
        demand_in[op_id] = sum(demand_out[p] for p in graph.parents(op_id))
        demand_out[op_id] = demand_in[op_id] * _selectivity(epochs, op_id)
    return demand_in, demand_out


def _selectivity(epochs: Sequence[Epoch], op_id: str) -> float:
    rows_in = sum((e["operators"].get(op_id) or {}).get("rows_in") or 0 for e in epochs)
    rows_out = sum((e["operators"].get(op_id) or {}).get("rows_out") or 0 for e in epochs)
    return rows_out / rows_in if rows_in > 0 else 1.0


def _units(epoch: Epoch) -> dict[str, dict[str, Any]]:
    """Units of one epoch's metrics: keyed operators and regions, with their instances."""
    units: dict[str, dict[str, Any]] = {}
    for op_id, op in epoch["operators"].items():
        if op.get("region") is None and op.get("busy_ms") is not None:
            units[op_id] = {"operators": [op_id], "instances": op["instances"]}
    for region_id, region in (epoch.get("regions") or {}).items():
        units[region_id] = {"operators": list(region["operators"]),
                            "instances": region["instances"]}
    return units


def _window_work(epochs: Sequence[Epoch], unit_id: str) -> tuple[int, float]:
    """Rows into the unit and busy milliseconds summed over its instances and the window."""
    rows, busy = 0, 0.0
    for epoch in epochs:
        found = (epoch.get("regions") or {}).get(unit_id) or epoch["operators"].get(unit_id)
        if found is None or found.get("busy_ms") is None:
            continue
        rows += found.get("rows_in") or 0
        busy += sum(found["busy_ms"])
    return rows, busy
