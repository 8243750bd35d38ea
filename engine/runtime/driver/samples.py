"""Serves sample commands: up to ``SAMPLE_ROWS`` rows an operator emitted in an epoch.

The rows come from the epoch's own frame of the operator, taken once the epoch is committed,
in a thread of their own: the epoch loop goes on to the next epoch meanwhile. A frame already
local is sliced; a Spark one is read with a limit, which stops once it has the rows, over what
the epoch kept on the executors (released after the take).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime
from typing import Any

import pyarrow as pa

from engine.runtime.control.messages import SAMPLE_ROWS, Ack, RowSample
from engine.runtime.spark.frames import Frame

log = logging.getLogger("streamscale.samples")

SAMPLE_EPOCHS = 10
"""The most epochs a sample waits for its operator to emit rows."""


def take_sample(frame: Frame, limit: int = SAMPLE_ROWS) -> RowSample:
    """The first ``limit`` rows of ``frame``, without the engine's hidden ``__`` columns."""
    table = frame.slice(0, limit) if isinstance(frame, pa.Table) else frame.limit(limit).toArrow()
    columns = [name for name in table.column_names if not name.startswith("__")]
    rows = table.select(columns).to_pylist()
    return RowSample(tuple(columns),
                     tuple(tuple(_json_value(row[c]) for c in columns) for row in rows))


class EpochSamples:
    """The sample commands a run has yet to answer. Each is served from the first epoch,
    from the one its plan names on, in which its operator emitted rows (a window aggregate
    emits only when a window closes), or answered with no rows after ``SAMPLE_EPOCHS``."""

    def __init__(self, deliver: Callable[[list[Ack], float], None]) -> None:
        self._deliver = deliver
        self._waiting: list[Ack] = []

    def due(self, acks: Sequence[Ack]) -> list[Ack]:
        """The samples an epoch whose plan has ``acks`` may serve: those waiting and its own
        applied ones."""
        return [*self._waiting, *(a for a in acks if answered_later(a))]

    def serve(self, due: Sequence[Ack], epoch: int, emitted: Mapping[str, int | None],
              frames: Mapping[str, Frame], release: Callable[[], None],
              ended_ms: float) -> None:
        """Answers the ``due`` samples whose operator emitted rows in ``epoch`` (``emitted``:
        rows out per operator, None when not counted) from ``frames``, in a thread, then
        calls ``release``; the others wait for the next epoch, up to their last."""
        self._waiting = [a for a in due if emitted.get(a.operator or "") == 0
                         and epoch < (a.applied_epoch or 0) + SAMPLE_EPOCHS - 1]
        served = [replace(a, applied_epoch=epoch) for a in due if a not in self._waiting]
        if not served:
            release()
            return

        def take() -> None:
            answered = []
            try:
                answered = [_served(ack, frames[ack.operator or ""]) for ack in served]
            finally:
                release()
                self._deliver(answered, ended_ms)

        threading.Thread(target=take, name="epoch-sample", daemon=True).start()


def answered_later(ack: Ack) -> bool:
    """Whether ``ack`` is a sample's to answer with rows once its epoch ran (a rejected one
    is answered with the epoch's other acks)."""
    return ack.kind == "sample" and ack.status == "applied"


def _served(ack: Ack, frame: Frame) -> Ack:
    try:
        return replace(ack, sample=take_sample(frame))
    except Exception as error:  # noqa: BLE001 - the run goes on; the ack says why
        log.warning("could not take a sample of %s: %s", ack.operator, error)
        return replace(ack, status="rejected", applied_epoch=None,
                       reason=f"could not read the rows of {ack.operator}: {error}")


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return str(value)
