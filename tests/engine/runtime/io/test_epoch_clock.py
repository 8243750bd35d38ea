"""The epoch clock of a run that reads sources through Spark as well as clock sources: a
tick per micro-batch (Spark's trigger paces the run)."""

from __future__ import annotations

from engine.runtime.io.epoch_clock import ClockReader


def _ticks(reader: ClockReader, start: dict) -> dict:
    rows, end = reader.read(start)
    assert list(rows) == [(end["tick"],)]
    return end


def test_the_clock_ticks_at_every_batch_and_reads_an_older_offset() -> None:
    reader = ClockReader()
    assert reader.initialOffset() == {"tick": 0}
    assert _ticks(reader, {"offset": 7, "timestamp": 0}) == {"tick": 1}
    assert _ticks(reader, {"tick": 1}) == {"tick": 2}
    assert list(reader.readBetweenOffsets({"tick": 1}, {"tick": 2})) == [(2,)]
