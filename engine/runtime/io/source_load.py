"""What each source offers, against what the run consumed.

A source reports, at the end of each epoch, a ``SourceLoad``: everything offered so far,
everything consumed so far, and the difference, its backlog. Each kind counts in its own
unit: rows due by the wall clock (``source.generator``, ``source.rate``), files in the
directory (``source.files``), a broker's lag (a stream source). The driver turns two
consecutive loads into the epoch's figures (``source_figures``).

Clock sources take at most ``max_rows_per_epoch`` rows per epoch, so a run that falls
behind shows a growing backlog rather than ever longer epochs. Which rows an epoch takes is
decided once, in the epoch's logged plan (``ClockSource.take``), so a replayed epoch
regenerates exactly the same rows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Protocol

from engine.dag import CLOCK_SOURCES, JobGraph

DEFAULT_CAP_SECONDS = 2.0
"""Without ``max_rows_per_epoch``, a clock source takes at most this many seconds of its
rate per epoch of ``epoch_ms``: a run that falls behind can catch up at up to twice its
rate, and no epoch grows beyond that."""


@dataclass(frozen=True)
class SourceLoad:
    """Cumulative figures of one source at the end of an epoch, in ``unit``."""

    offered: int
    consumed: int
    unit: str = "rows"

    @property
    def backlog(self) -> int:
        """Offered but not yet consumed."""
        return max(0, self.offered - self.consumed)


class SourceMeter(Protocol):
    """What the driver asks of each source at the end of every epoch."""

    def took(self, end: int | None, count: int) -> None:
        """This epoch consumed ``count`` units, up to position ``end`` where it has one."""

    def offered(self, epoch: int, now_ms: float) -> SourceLoad:
        """Offered and consumed so far, after ``epoch`` took its rows, at wall time ``now_ms``."""


def build_meters(
    graph: JobGraph, start_ms: int, epoch_ms: int, back_to_back: bool
) -> dict[str, SourceMeter]:
    """A meter for every source of the graph that can report its load."""
    meters: dict[str, SourceMeter] = {}
    for op_id in graph.sources():
        op = graph.operator(op_id)
        if op.type in CLOCK_SOURCES:
            meters[op_id] = ClockSource.from_params(
                dict(op.params), start_ms, epoch_ms, back_to_back
            )
        elif op.type == "source.files":
            meters[op_id] = FilesMeter(str(op.params.get("path", "")))
    return meters


@dataclass
class ClockSource:
    """A source whose rows fall due by the wall clock: row i at ``start_ms + i / rate``.

    ``epoch_rows`` fixes a saturating load instead (runs whose epochs go back to back):
    every epoch takes that many rows, whatever the clock says.
    """

    rows_per_second: int
    start_ms: int
    cap_rows: int
    epoch_rows: int | None = None
    consumed: int = 0

    @classmethod
    def from_params(
        cls, params: dict[str, Any], start_ms: int, epoch_ms: int, back_to_back: bool
    ) -> ClockSource:
        """Reads ``rows_per_second`` and ``max_rows_per_epoch`` (default: two epochs' worth)."""
        rate = int(params.get("rows_per_second", 1000))
        per_epoch = max(1, rate * max(epoch_ms, 1) // 1000)
        default_cap = max(1, int(per_epoch * DEFAULT_CAP_SECONDS))
        cap = int(params.get("max_rows_per_epoch") or default_cap)
        return cls(rate, start_ms, cap, per_epoch if back_to_back else None)

    def due(self, now_ms: float) -> int:
        """Rows due by ``now_ms``."""
        return max(0, int((now_ms - self.start_ms) * self.rows_per_second // 1000))

    def take(self, first: int, now_ms: float) -> tuple[int, int]:
        """The row range ``[first, end)`` an epoch planned at ``now_ms`` takes."""
        if self.epoch_rows is not None:
            return first, first + self.epoch_rows
        return first, max(first, min(self.due(now_ms), first + self.cap_rows))

    def took(self, end: int | None, count: int) -> None:
        """The epoch's planned range ended at ``end``."""
        if end is not None:
            self.consumed = end

    def offered(self, epoch: int, now_ms: float) -> SourceLoad:
        """Due by the clock (or, back to back, always one epoch ahead) against taken."""
        if self.epoch_rows is not None:
            return SourceLoad(self.consumed + self.epoch_rows, self.consumed)
        return SourceLoad(max(self.due(now_ms), self.consumed), self.consumed)


@dataclass
class FilesMeter:
    """A directory source: files present against files the run has read."""

    path: str
    consumed: int = 0

    def took(self, end: int | None, count: int) -> None:
        """The epoch read ``count`` more files."""
        self.consumed += count

    def offered(self, epoch: int, now_ms: float) -> SourceLoad:
        """Files in the directory (hidden and temporary names aside) against files read."""
        try:
            names = [n for n in os.listdir(self.path) if not n.startswith((".", "_"))]
        except OSError:
            names = []
        return SourceLoad(max(len(names), self.consumed), self.consumed, "files")


def source_figures(before: SourceLoad, now: SourceLoad, period_ms: float) -> dict[str, Any]:
    """One epoch's figures of a source from its loads at the end of the previous epoch and
    of this one, ``period_ms`` apart: offered and consumed in the epoch, backlog and its
    growth per second, the offered rate (consumed + backlog growth, per second), and the
    period the rates cover."""
    seconds = max(period_ms, 1.0) / 1000.0
    offered = now.offered - before.offered
    consumed = now.consumed - before.consumed
    growth = (now.backlog - before.backlog) / seconds
    return {
        "unit": now.unit,
        "offered": offered,
        "consumed": consumed,
        "backlog": now.backlog,
        "backlog_growth_per_s": round(growth, 1),
        "offered_rate": round(offered / seconds, 1),
        "consumed_rate": round(consumed / seconds, 1),
        "period_ms": round(seconds * 1000.0, 1),
    }
