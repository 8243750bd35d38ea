"""The closed-loop autoscaler's decision: DS2 on the offered load, with hysteresis.

One call decides from a window of epochs measured at the current configuration (the
caller passes only epochs after the last change took effect, once its cooldown passed):

- *up* when the run is behind: a unit (keyed operator or fused region) is congested, or
  the sources' backlog grew over the window. Every unit whose demanded rate exceeds its
  capacity gets DS2's ``ceil(demand / per-instance capacity)``, within bounds;
- *down* only when the run is comfortably ahead: nothing congested, no backlog growth,
  and a unit's demand below ``down_below`` of its capacity. It then gets the fewest
  instances that keep its demand under ``down_target`` of their capacity, which sits
  well under the congestion threshold, so a decision down never causes one up;
- otherwise *hold*. Every decision carries the figures that drove it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.dag.catalog import OPERATOR_TYPES
from engine.dag.model import JobGraph
from engine.dag.state import max_parallelism, pinned_reason
from engine.policies.etp import DEFAULT_THRESHOLD
from engine.policies.load import DEFAULT_DRAIN_S, Epoch, LoadModel, UnitLoad, load_model


@dataclass(frozen=True)
class AutoscaleSettings:
    """Bounds and tuning of the loop (``max_parallelism`` None: the operator's limit)."""

    min_parallelism: int = 1
    max_parallelism: int | None = None
    window_epochs: int = 3
    drain_s: float = DEFAULT_DRAIN_S
    threshold: float = DEFAULT_THRESHOLD
    down_below: float = 0.5
    down_target: float = 0.7
    growth_noise: float = 0.05  # backlog growth below this share of the offered rate is noise


@dataclass(frozen=True)
class Decision:
    """What the autoscaler decided and why: ``action`` up, down, hold or wait."""

    action: str
    changes: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    note: str = ""
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (proposals, audit details)."""
        return {"action": self.action, "changes": dict(self.changes),
                "reasons": dict(self.reasons), "note": self.note, "figures": self.figures}


def autoscale_decide(
    graph: JobGraph,
    epochs: Sequence[Epoch],
    settings: AutoscaleSettings,
    limits: Mapping[str, int],
    fixed: Mapping[str, str] | None = None,
) -> Decision:
    """The decision for the window ``epochs`` (oldest first). ``limits``: the largest
    parallelism each operator may take; ``fixed``: operators whose parallelism cannot
    change, with the reason (said in the decision instead of proposing a change)."""
    if len(epochs) < settings.window_epochs:
        return Decision("wait", note=f"measuring: {len(epochs)} of {settings.window_epochs} "
                                     "epochs at the current configuration")
    window = list(epochs[-settings.window_epochs:])
    model = load_model(graph, window, settings.drain_s, settings.threshold)
    figures = _figures(model)
    behind, why = _behind(model, settings)
    if behind:
        return _scale_up(model, settings, limits, fixed or {}, figures, why)
    return _scale_down(model, settings, figures)


def _behind(model: LoadModel, settings: AutoscaleSettings) -> tuple[bool, str]:
    congested = model.congested_units()
    if congested:
        worst = congested[0]
        return True, (f"{worst.unit_id} is congested: {worst.demand_rate:.0f} rows/s demanded "
                      f"against {worst.capacity:.0f} rows/s capacity")
    for source, trend in model.sources.items():
        if trend.backlog > 0 and trend.growth_per_s > settings.growth_noise * trend.offered_rate:
            return True, (f"the backlog of {source} grows by {trend.growth_per_s:.0f} rows/s "
                          f"({trend.backlog} rows waiting)")
    return False, ""


def _scale_up(
    model: LoadModel,
    settings: AutoscaleSettings,
    limits: Mapping[str, int],
    fixed: Mapping[str, str],
    figures: dict[str, Any],
    why: str,
) -> Decision:
    changes, reasons, notes = {}, {}, []
    for unit in model.units.values():
        if unit.demand_rate <= unit.capacity:
            continue
        wanted = unit.needed_instances()
        bounded = _bounded(wanted, unit.leader, settings, limits)
        if unit.leader in fixed:
            notes.append(f"{unit.unit_id} needs {wanted} instances but "
                         f"{unit.leader} {fixed[unit.leader]}")
        elif bounded > unit.instances:
            changes[unit.leader] = bounded
            reasons[unit.leader] = _reason(unit, wanted, bounded, why)
    note = "; ".join(notes) if notes else ("" if changes else f"behind ({why}) but at the bounds")
    return Decision("up" if changes else "hold", changes, reasons, note, figures)


def _scale_down(model: LoadModel, settings: AutoscaleSettings, figures: dict[str, Any]) -> Decision:
    changes, reasons = {}, {}
    for unit in model.units.values():
        if unit.instances <= settings.min_parallelism or unit.capacity <= 0:
            continue
        if unit.demand_rate >= settings.down_below * unit.capacity:
            continue
        wanted = max(unit.needed_instances(settings.down_target), settings.min_parallelism)
        if wanted < unit.instances:
            changes[unit.leader] = wanted
            reasons[unit.leader] = _reason(
                unit, wanted, wanted,
                f"demand is {unit.utilisation:.0%} of capacity (below "
                f"{settings.down_below:.0%}) and no backlog grows")
    return Decision("down" if changes else "hold", changes, reasons,
                    "" if changes else "keeping up", figures)


def _bounded(wanted: int, op_id: str, settings: AutoscaleSettings,
             limits: Mapping[str, int]) -> int:
    upper = limits.get(op_id, wanted)
    if settings.max_parallelism is not None:
        upper = min(upper, settings.max_parallelism)
    return max(min(wanted, upper), min(settings.min_parallelism, upper))


def _reason(unit: UnitLoad, wanted: int, bounded: int, why: str) -> str:
    bound = "" if bounded == wanted else f" (DS2 said {wanted}; kept within bounds)"
    return (f"autoscaler (DS2): {unit.leader} {unit.instances} -> {bounded} instances for "
            f"{unit.demand_rate:.0f} rows/s demanded at {unit.capacity_per_instance:.0f} "
            f"rows/s per instance{bound}; {why}")


def _figures(model: LoadModel) -> dict[str, Any]:
    """What drove the decision: every unit's demand against capacity, every source's trend."""
    return {"units": {u: load.to_dict() for u, load in model.units.items()},
            "sources": {s: trend.to_dict() for s, trend in model.sources.items()}}


def parallelism_limits(graph: JobGraph) -> tuple[dict[str, int], dict[str, str]]:
    """Each operator's largest parallelism, and the operators whose parallelism cannot
    change live with the reason: pinned ones, sinks, and sources Spark reads itself."""
    from engine.runtime.run_config import fixed_parallelism_reason
    from engine.runtime.source_load import CLOCK_SOURCES

    limits, fixed = {}, {}
    for op in graph.operators:
        limits[op.id] = max_parallelism(graph, op)
        role = OPERATOR_TYPES[op.type].role if op.type in OPERATOR_TYPES else "operator"
        pinned = pinned_reason(op)
        if pinned is not None:
            fixed[op.id] = f"is pinned to 1: {pinned}"
        elif role != "operator" and op.type not in CLOCK_SOURCES:
            fixed[op.id] = f"cannot change live: {fixed_parallelism_reason(op.type)}"
    return limits, fixed


@dataclass
class AutoscaleLoop:
    """The closed loop around ``autoscale_decide``: decide from the epochs measured since
    the last change took effect, apply, wait for the change's acknowledgement and then
    ``cooldown_s``, measure again. The caller applies the changes and reports back."""

    graph: JobGraph
    settings: AutoscaleSettings
    cooldown_s: float
    pending: bool = False
    applied_epoch: int = -1
    applied_at: float | None = None

    def decide(self, epochs: Sequence[Epoch], now: float) -> Decision:
        """The decision now (``wait`` while a change is pending or cooling down)."""
        if self.pending:
            return Decision("wait", note="waiting for the last change to take effect")
        if self.applied_at is not None and now - self.applied_at < self.cooldown_s:
            return Decision("wait", note="cooling down after the last change")
        since = [e for e in epochs if e["epoch"] > self.applied_epoch]
        limits, fixed = parallelism_limits(self.graph)
        return autoscale_decide(self.graph, since, self.settings, limits, fixed)

    def requested(self) -> None:
        """The decision's changes were sent."""
        self.pending = True

    def took_effect(self, epoch: int, now: float) -> None:
        """The changes were applied at ``epoch`` (acknowledged) at wall time ``now``."""
        self.pending = False
        self.applied_epoch = epoch
        self.applied_at = now
