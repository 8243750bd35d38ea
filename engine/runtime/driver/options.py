"""How a run runs (``RunOptions``) and what it keeps across restarts (its id and clock origin)."""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

from engine.runtime.state import StoreSpec

RUN_INFO = "run.json"


@dataclass(frozen=True)
class RunOptions:
    """How to run: checkpoint directory (Spark's and the epoch log), the epoch's nominal
    length, trigger interval (None: ``epoch_ms``; 0: epochs back to back), state store
    (None: the embedded SQLite store under the checkpoint), last epoch.

    With a trigger, clock sources offer the rows due by the wall clock and an epoch takes
    them up to the source's cap. Back to back, the load is saturating: every epoch takes
    ``epoch_ms`` worth of each clock source's rate, whatever the clock says."""

    checkpoint: str
    run_id: str | None = None
    epoch_ms: int = 1000
    trigger_ms: int | None = None
    store: StoreSpec | None = None
    stop_after_epoch: int | None = None

    @property
    def interval_ms(self) -> int:
        """The trigger interval: ``trigger_ms``, else one epoch."""
        return self.epoch_ms if self.trigger_ms is None else self.trigger_ms

    def state_store(self) -> StoreSpec:
        """The store the run keeps keyed state in."""
        return self.store or StoreSpec("sqlite", os.path.join(self.checkpoint, "state"), "vsn")


def run_info(options: RunOptions) -> dict[str, Any]:
    """The run's id and event-time origin, fixed at first start and kept in the
    checkpoint so a restarted run regenerates identical events."""
    path = os.path.join(options.checkpoint, RUN_INFO)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            return dict(json.load(handle))
    info = {"run_id": options.run_id or uuid.uuid4().hex[:12], "start_ms": int(time.time() * 1000)}
    save_run_info(options, info)
    return info


def save_run_info(options: RunOptions, info: dict[str, Any]) -> None:
    """Replaces the run's info in its checkpoint in one step."""
    os.makedirs(options.checkpoint, exist_ok=True)
    write_json(os.path.join(options.checkpoint, RUN_INFO), info)


def write_json(path: str, doc: dict[str, Any]) -> None:
    """Replaces the JSON file at ``path`` in one step, durably (fsync, then rename)."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(doc, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
