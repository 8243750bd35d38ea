"""The autoscaler's decisions on recorded series of epochs: a simulated run (a keyed count
whose instances each process ``capacity`` rows per busy second, behind a source offered
``rate`` rows/s) publishes each epoch's metrics as the driver does, and the loop decides on
every one with the series' own clock (the epochs' intervals), so nothing depends on the
machine the tests run on. A noisy neighbour lengthens the epochs (the driver's share of
each) but not the operators' busy time, as another process holding the cores does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.dag import parse_job_graph
from engine.policies.autoscale import (
    AutoscaleLoop,
    AutoscaleSettings,
    Decision,
    LastChange,
    autoscale_decide,
    parallelism_limits,
)

GRAPH = parse_job_graph({
    "name": "calm",
    "operators": [
        {"id": "events", "type": "source.generator", "params": {"rows_per_second": 500}},
        {"id": "counts", "type": "window_aggregate",
         "params": {"key": ["campaign_id"], "time": "event_time", "window": "2 seconds",
                    "aggregates": {"n": "count(*)"}}},
        {"id": "out", "type": "sink.memory", "params": {"name": "out"}},
    ],
    "edges": [{"from": "events", "to": "counts"}, {"from": "counts", "to": "out"}],
})
TRIGGER_MS = 2000.0
DRIVER_MS = 300.0  # the driver's own work per epoch, on a quiet machine


@dataclass(frozen=True)
class Phase:
    """``epochs`` epochs offered ``rate`` rows/s, the driver's share slowed ``neighbour``
    times by other load on the machine (1: a quiet machine)."""

    epochs: int
    rate: float
    neighbour: float = 1.0


@dataclass
class Simulated:
    """A run under the loop: its epochs' metrics and the loop's decisions."""

    instances: int
    capacity: float
    loop: AutoscaleLoop
    now_s: float = 0.0
    waiting: float = 0.0
    backlog: float = 0.0
    epochs: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    last: Decision | None = None
    held: list[tuple[float, str]] = field(default_factory=list)

    def run(self, phases: list[Phase]) -> Simulated:
        for phase in phases:
            for _ in range(phase.epochs):
                self._epoch(phase)
        return self

    def _epoch(self, phase: Phase) -> None:
        taken = int(self.waiting) or int(phase.rate * TRIGGER_MS / 1000.0)
        busy_ms = taken / self.instances / self.capacity * 1000.0
        batch_ms = busy_ms + DRIVER_MS * phase.neighbour
        interval_ms = max(TRIGGER_MS, batch_ms)
        backlog = phase.rate * batch_ms / 1000.0  # what arrived while the epoch ran
        self.epochs.append(_metrics(len(self.epochs), self.instances, taken, busy_ms, batch_ms,
                                    interval_ms, phase.rate * interval_ms / 1000.0, backlog,
                                    (backlog - self.backlog) / (interval_ms / 1000.0)))
        self.now_s += interval_ms / 1000.0
        self.waiting, self.backlog = phase.rate * interval_ms / 1000.0, backlog
        decision = self.loop.decide(self.epochs, self.now_s)
        if decision.action in ("up", "down"):
            self.decisions.append({"epoch": len(self.epochs) - 1, "at_s": self.now_s,
                                   **decision.to_dict()})
            self.loop.requested(decision.action, self.now_s)
            self.instances = decision.changes["counts"]
            self.loop.took_effect(len(self.epochs) - 1, self.now_s)
        self.last = decision
        if decision.action == "hold":
            self.held.append((self.now_s, decision.note))

    def actions(self) -> list[str]:
        return [d["action"] for d in self.decisions]


def _metrics(epoch: int, instances: int, taken: int, busy_ms: float, batch_ms: float,
             interval_ms: float, offered: float, backlog: float, growth: float
             ) -> dict[str, Any]:
    out = taken // 100
    return {
        "epoch": epoch, "batch_duration_ms": batch_ms, "interval_ms": interval_ms,
        "sources": {"events": {"unit": "rows", "offered": int(offered), "consumed": taken,
                               "backlog": int(backlog), "backlog_growth_per_s": growth,
                               "period_ms": interval_ms}},
        "operators": {
            "events": {"instances": 1, "rows_in": None, "rows_out": taken, "busy_ms": None,
                       "region": "events"},
            "counts": {"instances": instances, "rows_in": taken, "rows_out": out,
                       "busy_ms": [round(busy_ms, 1)] * instances, "region": None},
            "out": {"instances": 1, "rows_in": out, "rows_out": out, "busy_ms": None,
                    "region": "out"},
        },
        "regions": {},
    }


def simulate(phases: list[Phase], *, instances: int, capacity: float = 1000.0,
             **settings: Any) -> Simulated:
    loop = AutoscaleLoop(GRAPH, AutoscaleSettings(max_parallelism=4, **settings),
                         cooldown_s=0.0)
    return Simulated(instances, capacity, loop).run(phases)


def _window_epochs(settings: AutoscaleSettings) -> int:
    return int(settings.down_window_s * 1000.0 // TRIGGER_MS)


def test_a_calm_run_with_a_noisy_neighbour_scales_down_once_and_never_back_up() -> None:
    # A quarter of two instances' capacity, then a neighbour slowing the driver four times
    # over for five minutes, then quiet again.
    run = simulate([Phase(200, 500.0), Phase(150, 500.0, neighbour=4.0), Phase(100, 500.0)],
                   instances=2)
    assert run.actions() == ["down"]
    assert run.decisions[0]["changes"] == {"counts": 1}
    assert run.decisions[0]["at_s"] >= 300.0
    assert "measured busy time" in run.decisions[0]["reasons"]["counts"]
    # The neighbour showed as it does on a real machine: epochs longer than their trigger,
    # a backlog beyond one epoch's arrivals that grows while they lengthen.
    slowed = run.epochs[200:215]
    assert all(e["batch_duration_ms"] > TRIGGER_MS for e in slowed)
    assert any(e["sources"]["events"]["backlog"] > 500.0 * TRIGGER_MS / 1000.0
               and e["sources"]["events"]["backlog_growth_per_s"] > 0 for e in slowed)


def test_a_run_that_keeps_up_only_at_its_instances_is_never_scaled() -> None:
    # A third of two instances' capacity: one instance would run above the down target.
    run = simulate([Phase(150, 700.0), Phase(150, 700.0, neighbour=6.0), Phase(150, 700.0)],
                   instances=2)
    assert run.actions() == []
    assert run.last is not None and run.last.action == "hold"
    assert "fewer instances would leave the operators above 70%" in run.last.note


def test_real_overload_is_scaled_up_at_the_first_window() -> None:
    for neighbour in (1.0, 3.0):
        run = simulate([Phase(10, 2500.0, neighbour=neighbour)], instances=1)
        first = run.decisions[0]
        assert first["epoch"] == 2  # the first window of three epochs
        assert first["action"] == "up"
        assert first["changes"]["counts"] >= 3  # DS2: 2,500 rows/s at 1,000 per instance
        assert "counts is congested" in first["reasons"]["counts"]
        assert "measured busy time" in first["reasons"]["counts"]
        assert "down" not in run.actions()


def test_a_scale_down_waits_for_the_window_of_calm() -> None:
    for window_s in (300.0, 60.0):
        run = simulate([Phase(200, 500.0)], instances=2, down_window_s=window_s)
        down = run.decisions[0]
        # The first epoch whose epochs since the start cover the window, not one sooner.
        assert down["epoch"] == _window_epochs(AutoscaleSettings(down_window_s=window_s)) - 1
        assert down["action"] == "down"
        assert run.actions() == ["down"]
    short = simulate([Phase(100, 500.0)], instances=2)
    assert short.actions() == []
    assert short.last is not None
    assert "calm for 200 s of the 300 s a scale-down needs" in short.last.note


def test_a_scale_down_is_not_undone_within_the_window() -> None:
    # Calm until the scale-down at 300 s, then three times the load: the run falls behind
    # at one instance, and is scaled up on the first epoch 300 s after the scale-down.
    run = simulate([Phase(160, 500.0), Phase(200, 1500.0)], instances=2)
    down, up = run.decisions[:2]
    assert (down["action"], up["action"]) == ("down", "up")
    assert up["at_s"] - down["at_s"] >= 300.0
    held = [(at, note) for at, note in run.held if down["at_s"] < at < up["at_s"]]
    assert held and all("not undone within 300 s" in note for _, note in held[-3:])
    assert held[-1][0] - down["at_s"] < 300.0


def test_no_decision_undoes_the_last_within_the_window() -> None:
    calm = simulate([Phase(150, 500.0)], instances=2, down_window_s=1e9).epochs
    limits, fixed = parallelism_limits(GRAPH)
    settings = AutoscaleSettings(max_parallelism=4)
    assert autoscale_decide(GRAPH, calm, settings, limits, fixed).action == "down"
    held = autoscale_decide(GRAPH, calm, settings, limits, fixed, LastChange("up", 120.0))
    assert held.action == "hold"
    assert "the scale up 120 s ago is not undone within 300 s" in held.note
    later = autoscale_decide(GRAPH, calm, settings, limits, fixed, LastChange("up", 300.0))
    assert later.action == "down"
    again = autoscale_decide(GRAPH, calm, settings, limits, fixed, LastChange("down", 10.0))
    assert again.action == "down"  # the same direction again is no flap


def test_no_scale_down_while_a_backlog_exceeds_one_epochs_arrivals() -> None:
    calm = simulate([Phase(150, 500.0)], instances=2, down_window_s=1e9).epochs
    last = calm[-1]
    source = {**last["sources"]["events"], "backlog": 5 * last["sources"]["events"]["offered"]}
    behind = [*calm[:-1], {**last, "sources": {"events": source}}]
    limits, fixed = parallelism_limits(GRAPH)
    decision = autoscale_decide(GRAPH, behind, AutoscaleSettings(max_parallelism=4), limits,
                                fixed)
    assert decision.action == "hold"
    assert "no scale-down while a backlog is more than one epoch's arrivals" in decision.note


def test_a_growing_backlog_with_the_operators_busy_most_of_each_second_is_behind() -> None:
    # 800 rows/s at 1,000 per busy second: no unit is congested, but the backlog grows
    # epoch after epoch with the operators busy over 0.7 s of each second.
    run = simulate([Phase(3, 800.0), Phase(6, 800.0, neighbour=3.0)], instances=1)
    assert run.actions() == ["up"]
    up = run.decisions[0]
    assert up["changes"] == {"counts": 2}
    assert "the backlog of events grows" in up["reasons"]["counts"]
    assert up["figures"]["units"]["counts"]["congested"] is False
