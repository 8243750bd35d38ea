"""Two measurements side by side in one run: warmed up, then taken in turns."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

Measure = Callable[[], list[float]]


def alternating_rounds(
    first: Measure, second: Measure, rounds: int
) -> tuple[list[float], list[float]]:
    """Epoch times of ``first`` and ``second`` over ``rounds`` rounds, after one warm-up run
    of each that is not kept (the JVM's first query pays for class loading and JIT). Each
    goes first every other round, so that a drift of the machine weighs on both alike."""
    first(), second()
    firsts: list[float] = []
    seconds: list[float] = []
    for round_ in range(rounds):
        if round_ % 2:
            seconds += second()
            firsts += first()
        else:
            firsts += first()
            seconds += second()
    return firsts, seconds


def rows_per_s(rows_per_batch: int, epoch_ms: list[float]) -> float:
    """The rate of epochs of ``rows_per_batch`` rows that took ``epoch_ms`` each."""
    return rows_per_batch * len(epoch_ms) / (sum(epoch_ms) / 1000.0)


def side_by_side(rows_per_batch: int, first: tuple[str, list[float]],
                 second: tuple[str, list[float]], ratio: str) -> dict[str, Any]:
    """The figures of two measurements taken in the same rounds, each a (name, epoch times)
    pair: epochs measured, each one's median epoch and rate, and under ``ratio`` the first's
    rate over the second's."""
    (name_a, ms_a), (name_b, ms_b) = first, second
    rate_a, rate_b = rows_per_s(rows_per_batch, ms_a), rows_per_s(rows_per_batch, ms_b)
    return {
        "epochs_measured": len(ms_a),
        f"{name_a}_median_epoch_ms": round(statistics.median(ms_a), 1),
        f"{name_b}_median_epoch_ms": round(statistics.median(ms_b), 1),
        f"{name_a}_rows_per_s": round(rate_a),
        f"{name_b}_rows_per_s": round(rate_b),
        ratio: round(rate_a / rate_b, 3),
    }
