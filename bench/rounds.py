"""Two measurements side by side in one run: warmed up, then taken in turns."""

from __future__ import annotations

from collections.abc import Callable

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
