"""The calm phase of ``python -m bench autoscale`` (its figures are defined there): a run
offered a third of what the job processes at parallelism 1, started with 2 instances of
the count, under the autoscaler's loop for 5 minutes, with a CPU-bound neighbour process
spinning through the middle half of it, as other work on the machine does."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from bench.autoscale import Observer, _flaps, _progress, observed_run, overload_job
from engine.policies.autoscale import AutoscaleLoop, AutoscaleSettings
from engine.runtime.api import load_graph

CALM_SHARE, CALM_PARALLELISM = 1 / 3, 2


def calm_job(rate: int) -> dict[str, Any]:
    """The overload job offered ``rate`` rows/s, its count started at
    ``CALM_PARALLELISM`` instances (a scale-down is possible)."""
    job = overload_job(rate)
    for op in job["operators"]:
        if op["id"] == "counts":
            op["parallelism"] = CALM_PARALLELISM
    return job


def neighbour_span(calm_s: float) -> tuple[float, float]:
    """When the neighbour spins, in seconds from the calm phase's start: its middle half,
    so that its start and its end both fall inside the phase."""
    return calm_s / 4, 3 * calm_s / 4


def neighbour_start() -> subprocess.Popen[bytes]:
    """A CPU-bound process that is not the run's: it holds a core until stopped."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def neighbour_stop(process: subprocess.Popen[bytes]) -> None:
    """Stops the neighbour started by ``neighbour_start``."""
    process.terminate()
    process.wait(timeout=30)


def calm_figures(decisions: list[dict[str, Any]]) -> dict[str, int]:
    """The calm phase's figures from its decisions (oldest first)."""
    actions = [d["action"] for d in decisions]
    return {"calm_scale_ups": actions.count("up"), "calm_flaps": _flaps(decisions),
            "calm_scale_downs": actions.count("down")}


def measure_calm(spark: Any, capacity: float, *, max_parallelism: int, trigger_ms: int,
                 calm_s: float) -> dict[str, Any]:
    """The calm phase: a run offered ``CALM_SHARE`` of ``capacity`` under the loop for
    ``calm_s``, with the neighbour spinning through ``neighbour_span``; returns its rate and
    the loop's decisions."""
    rate = int(capacity * CALM_SHARE)
    graph = load_graph(calm_job(rate))
    loop = AutoscaleLoop(graph, AutoscaleSettings(max_parallelism=max_parallelism),
                         cooldown_s=2 * trigger_ms / 1000.0)
    _progress(f"calm phase: offering {rate} rows/s for {calm_s:.0f} s at parallelism "
              f"{CALM_PARALLELISM}, a neighbour spinning from {neighbour_span(calm_s)[0]:.0f} "
              f"to {neighbour_span(calm_s)[1]:.0f} s")
    with observed_run(spark, graph, loop, trigger_ms=trigger_ms,
                      name="autoscale-calm") as observer:
        _observe_with_neighbour(observer, calm_s)
    return {"rate": rate, "decisions": observer.decisions}


def _observe_with_neighbour(observer: Observer, seconds: float) -> None:
    """Steps the loop for ``seconds``, the neighbour spinning through its span."""
    started = time.monotonic()
    begin, end = neighbour_span(seconds)
    neighbour: subprocess.Popen[bytes] | None = None
    try:
        while (elapsed := time.monotonic() - started) < seconds:
            if neighbour is None and begin <= elapsed < end:
                neighbour = neighbour_start()
                _progress("the neighbour starts spinning")
            elif neighbour is not None and elapsed >= end:
                neighbour_stop(neighbour)
                neighbour = None
                _progress("the neighbour stops")
            if observer.step() is None:
                time.sleep(0.05)
    finally:
        if neighbour is not None:
            neighbour_stop(neighbour)
