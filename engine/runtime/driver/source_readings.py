"""What each source offered, consumed and left behind, read at the end of every epoch."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from engine.runtime.io.source_load import SourceLoad, SourceMeter, source_figures
from engine.runtime.io.taken import ClockRange, SourceTake
from engine.runtime.stage.pipeline import EpochResult


class SourceReadings:
    """Each source's load at its last reading, so a reading's rates cover the time since
    the one before (not the time between epoch starts)."""

    def __init__(self, meters: dict[str, SourceMeter]) -> None:
        self.meters = meters
        self._loads: dict[str, SourceLoad] = {}
        self._read_at: dict[str, float] = {}

    def sources(
        self, epoch: int, planned: Mapping[str, SourceTake], interval_ms: float
    ) -> dict[str, dict[str, Any]]:
        """Offered, consumed and backlog of every metered source at the end of ``epoch``
        (``planned``: what the epoch's plan took of each source)."""
        figures = {}
        for op, meter in self.meters.items():
            part = planned.get(op)
            taken = part.count if part is not None else 0
            end = part.end if isinstance(part, ClockRange) else None
            meter.took(end, taken)
            load = meter.offered(epoch, time.time() * 1000.0)
            figures[op] = self._read(op, load, taken, interval_ms)
        return figures

    def brokers(
        self, lags: dict[str, dict[str, int]], result: EpochResult, interval_ms: float
    ) -> dict[str, dict[str, Any]]:
        """A broker source's load: what it consumed so far, and its lag as the backlog."""
        figures = {}
        for op, streams in lags.items():
            taken = result.rows_out.get(op) or 0
            consumed = (self._loads[op].consumed if op in self._loads else 0) + taken
            load = SourceLoad(consumed + sum(streams.values()), consumed)
            figures[op] = self._read(op, load, taken, interval_ms)
        return figures

    def _read(self, op: str, load: SourceLoad, taken: int, interval_ms: float) -> dict[str, Any]:
        """The figures since the source's last reading; at its first, the load before the
        epoch is taken as ``load`` less what the epoch took (a broker's lag before it is
        unknown)."""
        now_ms = time.time() * 1000.0
        first = SourceLoad(load.offered - taken, load.consumed - taken, load.unit)
        before = self._loads.get(op, first)
        since_ms = now_ms - self._read_at[op] if op in self._read_at else interval_ms
        self._loads[op], self._read_at[op] = load, now_ms
        return source_figures(before, load, since_ms)
