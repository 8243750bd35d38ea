"""What a stopped run keeps to resume from, and how it is discarded.

A run's checkpoint folder holds its id and clock origin (``run.json``), its epoch log (every
epoch's plan: the sources' positions, the files taken, the control cursor) and, on one
machine, its keyed state; on a cluster the state is in Redis under the run's namespace. A
driver started on the same checkpoint and store continues the run exactly once, so stopping
a run deletes nothing: it is resumable until its state is discarded.
"""

from __future__ import annotations

import os
import shutil

from engine.runtime.driver.options import RUN_INFO, RunOptions
from engine.runtime.state import StateSize, StoreSpec, build_store


def run_store(checkpoint: str, run_id: str, state_url: str | None, prefix: str) -> StoreSpec:
    """Where run ``run_id`` keeps its keyed state: Redis ``state_url`` under the run's
    namespace, else the embedded store in its checkpoint."""
    if state_url:
        return StoreSpec("redis", state_url, f"{prefix}{run_id}")
    return RunOptions(checkpoint=checkpoint).state_store()


def kept_state(checkpoint: str, *, run_id: str, state_url: str | None,
               prefix: str) -> StateSize | None:
    """The state a run with no driver kept under ``checkpoint`` and in its store, as the
    store measures it; None when it kept none (it never started, or its state was
    discarded)."""
    if not os.path.exists(os.path.join(checkpoint, RUN_INFO)):
        return None
    return build_store(run_store(checkpoint, run_id, state_url, prefix)).size()


def discard_state(checkpoint: str, *, run_id: str, state_url: str | None, prefix: str) -> None:
    """Deletes the run's checkpoint and its keyed state. The checkpoint is first renamed in
    one step, so a discard that fails half-way leaves no state a driver would resume from."""
    store = run_store(checkpoint, run_id, state_url, prefix)
    checkpoint = checkpoint.rstrip(os.sep)
    gone = f"{checkpoint}.discarded"
    if os.path.isdir(checkpoint):
        shutil.rmtree(gone, ignore_errors=True)
        os.replace(checkpoint, gone)
    if not store.location.startswith(checkpoint):  # a store inside goes with the folder
        build_store(store).clear()
    shutil.rmtree(gone, ignore_errors=True)
