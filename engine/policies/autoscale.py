"""The closed-loop autoscaler's decision: DS2 on the offered load, with hysteresis.

One call decides from the epochs measured at the current configuration (the caller passes
only epochs after the last change took effect, once its cooldown passed; a driver's first
epochs, slow with its start-up, are left out). Every judgement works from the run's own
measured busy time (each instance's and each fused region's), never from the epochs' wall
time: another process holding the cores lengthens the epochs, not the operators' work, and
more instances would not shorten it.

- *up* at once when the run's operators are behind: a unit (keyed operator or fused
  region) is congested, or a source's backlog grows while the operators are busy most of
  each second (at least ``down_target``). An epoch runs its units in series, so the
  operators keep up when the sum of their utilisations is at most 1: every unit gets at
  least DS2's ``ceil(demand / per-instance capacity)``, then the unit with the largest
  share one more instance at a time until the sum is at most 1 or the bounds are reached;
- *down* only when the run has been comfortably ahead for ``down_window_s`` (longer than
  the few epochs an up needs): the operators' busy utilisation under ``down_below`` in
  every epoch of that window, no backlog beyond one epoch's arrivals, and, at fewer
  instances, a predicted utilisation (from the window's busiest epoch) still under
  ``down_target``, well under the congestion threshold, so a step down never causes a step
  up;
- never the opposite of the last decision within ``down_window_s`` of it;
- otherwise *hold*. Every decision carries the figures that drove it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.dag.catalog import OPERATOR_TYPES
from engine.dag.model import JobGraph
from engine.dag.state import (
    CLOCK_SOURCES,
    fixed_parallelism_reason,
    max_parallelism,
    pinned_reason,
)
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
    # A scale-down waits for this much calm at the current configuration, and no decision is
    # undone sooner: a rescale is cheap here, a rescale undone a minute later is not.
    down_window_s: float = 300.0
    # A Spark session's first epochs start its tasks and Python workers, and a run's first
    # epoch in a driver starts its query: slow for reasons that pass, so they are measured
    # and shown but never judged. A warm standby's own warm-up epochs count for its session.
    warmup_epochs: int = 3


@dataclass(frozen=True)
class LastChange:
    """The loop's last decision that changed the run: ``action`` up or down, decided
    ``age_s`` seconds ago."""

    action: str
    age_s: float


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


_OPPOSITE = {"up": "down", "down": "up"}


def autoscale_decide(
    graph: JobGraph,
    epochs: Sequence[Epoch],
    settings: AutoscaleSettings,
    limits: Mapping[str, int],
    fixed: Mapping[str, str] | None = None,
    last: LastChange | None = None,
) -> Decision:
    """The decision for ``epochs`` (oldest first, all since the last change took effect).
    ``limits``: the largest parallelism each operator may take; ``fixed``: operators whose
    parallelism cannot change, with the reason (said in the decision instead of proposing
    a change); ``last``: the last change decided, which is not undone within
    ``settings.down_window_s``."""
    epochs = [e for e in epochs if not warming_up(e, settings)]
    if len(epochs) < settings.window_epochs:
        return Decision("wait", note=f"measuring: {len(epochs)} of {settings.window_epochs} "
                                     "epochs at the current configuration past the "
                                     "driver's start-up")
    window = list(epochs[-settings.window_epochs:])
    model = load_model(graph, window, settings.drain_s, settings.threshold)
    figures = _figures(model)
    behind, why = _behind(model, settings)
    if behind:
        decision = _scale_up(model, settings, limits, fixed or {}, figures, why)
    else:
        decision = _scale_down(graph, epochs, model, settings, fixed or {}, figures)
    return _not_undoing(decision, last, settings)


def warming_up(epoch: Epoch, settings: AutoscaleSettings) -> bool:
    """Whether ``epoch`` is its run's first in its driver, or one of its driver's Spark
    session's first ``warmup_epochs`` (epochs recorded without the counts are judged)."""
    ran = epoch.get("driver_epoch")
    if ran is None:
        return False
    session = epoch.get("session_epoch")
    return ran == 0 or (ran if session is None else session) < settings.warmup_epochs


def _not_undoing(decision: Decision, last: LastChange | None,
                 settings: AutoscaleSettings) -> Decision:
    """``decision``, or a hold when it would undo ``last`` within the window."""
    if (last is None or last.age_s >= settings.down_window_s
            or _OPPOSITE.get(decision.action) != last.action):
        return decision
    why = "; ".join(decision.reasons.values())
    return Decision("hold", note=f"would scale {decision.action} ({why}), but the scale "
                                 f"{last.action} {last.age_s:.0f} s ago is not undone within "
                                 f"{settings.down_window_s:.0f} s", figures=decision.figures)


def _busy(model: LoadModel) -> str:
    """The busy utilisation, said as what it is measured from."""
    return (f"the run's operators are busy {model.busy_utilisation:.2f} s per second by "
            f"their own measured busy time (the epochs' wall time adds "
            f"{model.overhead_share:.2f} s outside them)")


def _behind(model: LoadModel, settings: AutoscaleSettings) -> tuple[bool, str]:
    congested = model.congested_units()
    if congested:
        worst = congested[0]
        return True, (f"{worst.unit_id} is congested: {worst.demand_rate:.0f} rows/s demanded "
                      f"against {worst.capacity:.0f} rows/s capacity; {_busy(model)}")
    if model.busy_utilisation < settings.down_target:
        # A backlog that grows while the operators have much of each second to spare grows
        # for reasons outside them (the driver, other load on the machine). The bar is the
        # scale-down's target, so the load a scale-down leaves never reads as behind.
        return False, ""
    for source, trend in model.sources.items():
        if trend.in_flight:
            continue  # rows that arrived while the last epoch ran: not behind
        if trend.growth_per_s > 0:
            return True, (f"the backlog of {source} grows by {trend.growth_per_s:.0f} rows/s "
                          f"({trend.backlog} rows waiting) and {_busy(model)}")
    return False, ""


def _scale_up(
    model: LoadModel,
    settings: AutoscaleSettings,
    limits: Mapping[str, int],
    fixed: Mapping[str, str],
    figures: dict[str, Any],
    why: str,
) -> Decision:
    """DS2 over units in series: while the operators' utilisation at the proposed
    instances exceeds 1 (and always for a unit that cannot keep up on its own), one more
    instance for the unit with the largest share, within bounds."""
    notes: list[str] = []
    movable = {}
    for unit in model.units.values():
        if unit.capacity <= 0:
            continue
        if unit.leader in fixed:
            if unit.congested:
                notes.append(f"{unit.unit_id} needs {unit.needed_instances()} instances but "
                             f"{unit.leader} {fixed[unit.leader]}")
            continue
        movable[unit.unit_id] = _bounded(unit.needed_instances(), unit.leader, settings,
                                         limits, upper_only=True)
    instances = {u: model.units[u].instances for u in movable}
    wanted = {u: max(instances[u], n) for u, n in movable.items()}
    wanted = _grow_until(model, wanted, settings, limits, target=1.0)
    if wanted == instances and wanted:
        # Behind with a growing backlog while the operators' shares add up to at most a
        # second: the largest share still gets one more instance, or the run stays behind.
        growable = [u for u in wanted
                    if wanted[u] < _upper(model.units[u].leader, settings, limits)]
        if growable:
            worst = max(growable, key=lambda u: model.units[u].utilisation)
            wanted = {**wanted, worst: wanted[worst] + 1}
    changes, reasons = {}, {}
    for unit_id, count in wanted.items():
        unit = model.units[unit_id]
        if count > unit.instances:
            changes[unit.leader] = count
            reasons[unit.leader] = _reason(unit, unit.needed_instances(), count, why)
    note = "; ".join(notes) if notes else ("" if changes else f"behind ({why}) but at the bounds")
    return Decision("up" if changes else "hold", changes, reasons, note, figures)


def _grow_until(model: LoadModel, wanted: dict[str, int], settings: AutoscaleSettings,
                limits: Mapping[str, int], target: float) -> dict[str, int]:
    """One more instance at a time for the movable unit with the largest share, until the
    operators' utilisation at ``wanted`` is at most ``target`` or every unit is at its
    bound."""
    while _utilisation_at(model, wanted) > target:
        growable = [u for u in wanted
                    if wanted[u] < _upper(model.units[u].leader, settings, limits)]
        if not growable:
            break
        worst = max(growable, key=lambda u: _share_at(model.units[u], wanted[u]))
        wanted[worst] += 1
    return wanted


def _share_at(unit: UnitLoad, count: int) -> float:
    """The unit's utilisation at ``count`` instances."""
    return unit.utilisation * unit.instances / max(count, 1)


def _utilisation_at(model: LoadModel, counts: Mapping[str, int]) -> float:
    """The operators' busy utilisation if the units in ``counts`` had those instances."""
    return sum(_share_at(u, counts.get(u.unit_id, u.instances)) for u in model.units.values())


def _scale_down(graph: JobGraph, epochs: Sequence[Epoch], model: LoadModel,
                settings: AutoscaleSettings, fixed: Mapping[str, str],
                figures: dict[str, Any]) -> Decision:
    """After ``down_window_s`` of calm (see the module): one instance less at a time for
    the unit with the smallest share, while the window's busiest epoch stays under
    ``down_target`` at the fewer instances."""
    calm = _calm(graph, epochs, model, settings)
    if isinstance(calm, str):
        return Decision("hold", note=f"keeping up; {calm}", figures=figures)
    span_s, models = calm
    counts = {u.unit_id: u.instances for u in model.units.values()
              if u.capacity > 0 and u.leader not in fixed}
    while True:
        shrinkable = [u for u in counts if counts[u] > settings.min_parallelism]
        if not shrinkable:
            break
        best = min(shrinkable, key=lambda u: _share_at(model.units[u], counts[u] - 1))
        trial = {**counts, best: counts[best] - 1}
        if _peak_at(models, trial) > settings.down_target:
            break
        counts = trial
    busiest = max(m.busy_utilisation for m in models)
    changes, reasons = {}, {}
    for unit_id, count in counts.items():
        unit = model.units[unit_id]
        if count < unit.instances:
            changes[unit.leader] = count
            reasons[unit.leader] = _reason(
                unit, count, count,
                f"the run's operators were busy at most {busiest:.0%} of each second by their "
                f"own measured busy time (below {settings.down_below:.0%}) for {span_s:.0f} s, "
                f"with no backlog beyond one epoch's arrivals; predicted at "
                f"{_peak_at(models, counts):.0%} after it (under {settings.down_target:.0%})")
    if changes:
        return Decision("down", changes, reasons, "", figures)
    return Decision("hold", note=f"keeping up; fewer instances would leave the operators "
                                 f"above {settings.down_target:.0%} in the window's busiest "
                                 f"epoch ({busiest:.0%} now)", figures=figures)


def _calm(graph: JobGraph, epochs: Sequence[Epoch], model: LoadModel,
          settings: AutoscaleSettings) -> tuple[float, list[LoadModel]] | str:
    """The span and per-epoch load models of the last ``down_window_s`` of epochs when the
    run was calm all through it; otherwise why not. The cheap checks go first: this runs on
    every decision of a run that keeps up."""
    if model.busy_utilisation >= settings.down_below:
        return f"{_busy(model)}, not under {settings.down_below:.0%}"
    waiting = [f"{s} ({t.backlog} rows)" for s, t in model.sources.items() if not t.in_flight]
    if waiting:
        return ("no scale-down while a backlog is more than one epoch's arrivals: "
                + ", ".join(waiting))
    span_s, recent = 0.0, []
    for epoch in reversed(epochs):
        recent.append(epoch)
        span_s += max(epoch.get("interval_ms") or 0.0, epoch.get("batch_duration_ms") or 0.0)
        if span_s >= settings.down_window_s * 1000.0:
            break
    span_s /= 1000.0
    if span_s < settings.down_window_s:
        return (f"calm for {span_s:.0f} s of the {settings.down_window_s:.0f} s a scale-down "
                "needs at this configuration")
    models = [load_model(graph, [e], settings.drain_s, settings.threshold) for e in recent]
    busiest = max(m.busy_utilisation for m in models)
    if busiest >= settings.down_below:
        return (f"the run's operators were busy {busiest:.0%} of a second in an epoch of the "
                f"last {span_s:.0f} s, not under {settings.down_below:.0%}")
    return span_s, models


def _peak_at(models: Sequence[LoadModel], counts: Mapping[str, int]) -> float:
    """The operators' busy utilisation at ``counts`` in the busiest of ``models``."""
    return max(_utilisation_at(m, counts) for m in models)


def _upper(op_id: str, settings: AutoscaleSettings, limits: Mapping[str, int]) -> int:
    upper = limits.get(op_id, 10**6)
    if settings.max_parallelism is not None:
        upper = min(upper, settings.max_parallelism)
    return upper


def _bounded(wanted: int, op_id: str, settings: AutoscaleSettings,
             limits: Mapping[str, int], upper_only: bool = False) -> int:
    upper = min(_upper(op_id, settings, limits), max(wanted, 1))
    return upper if upper_only else max(upper, min(settings.min_parallelism, upper))


def _reason(unit: UnitLoad, wanted: int, bounded: int, why: str) -> str:
    bound = "" if bounded >= wanted else f" (DS2 said {wanted}; kept within bounds)"
    return (f"autoscaler (DS2): {unit.leader} {unit.instances} -> {bounded} instances for "
            f"{unit.demand_rate:.0f} rows/s demanded at {unit.capacity_per_instance:.0f} "
            f"rows/s per busy second of an instance{bound}; {why}")


def _figures(model: LoadModel) -> dict[str, Any]:
    """What drove the decision: every unit's demand against capacity, every source's trend."""
    return {"units": {u: load.to_dict() for u, load in model.units.items()},
            "sources": {s: trend.to_dict() for s, trend in model.sources.items()},
            "busy_utilisation": round(model.busy_utilisation, 3),
            "run_utilisation": round(model.run_utilisation, 3),
            "overhead_share": round(model.overhead_share, 3)}


def parallelism_limits(graph: JobGraph) -> tuple[dict[str, int], dict[str, str]]:
    """Each operator's largest parallelism, and the operators whose parallelism cannot
    change live with the reason: pinned ones, sinks, and sources Spark reads itself."""
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
    last_action: str | None = None
    decided_at: float | None = None

    def decide(self, epochs: Sequence[Epoch], now: float) -> Decision:
        """The decision now (``wait`` while a change is pending or cooling down)."""
        if self.pending:
            return Decision("wait", note="waiting for the last change to take effect")
        if self.applied_at is not None and now - self.applied_at < self.cooldown_s:
            return Decision("wait", note="cooling down after the last change")
        since = [e for e in epochs if e["epoch"] > self.applied_epoch]
        limits, fixed = parallelism_limits(self.graph)
        last = None
        if self.last_action is not None and self.decided_at is not None:
            last = LastChange(self.last_action, now - self.decided_at)
        return autoscale_decide(self.graph, since, self.settings, limits, fixed, last)

    def requested(self, action: str, now: float) -> None:
        """The changes of a decision ``action`` (up or down) were sent at wall time
        ``now``."""
        self.pending = True
        self.last_action = action
        self.decided_at = now

    def took_effect(self, epoch: int, now: float) -> None:
        """The changes were applied at ``epoch`` (acknowledged) at wall time ``now``."""
        self.pending = False
        self.applied_epoch = epoch
        self.applied_at = now
