"""The run's epoch log in the checkpoint directory, next to Spark's own.

Before epoch e runs, its plan (``EpochPlan``: the configuration of every operator, what it
takes of each source, watermarks, the control cursor and the acks of commands taking effect)
is written; after it runs, its outcome (``EpochOutcome``: max event time, key-group loads).
A replayed epoch reuses its plan, so it runs with exactly the configuration of the first
attempt. A file that does not read as a plan or an outcome fails the run naming the file
and the field (``MalformedPlan``).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable
from typing import TypeVar

from engine.runtime.control.epoch_plan import EpochOutcome, EpochPlan
from engine.runtime.control.messages import Ack
from engine.runtime.driver.options import write_json
from engine.runtime.errors import MalformedPlan
from engine.runtime.io.taken import FilesTaken

# Epochs of history kept: a replay needs the last two; a start delivers the acks of all kept
# again (``ended_acks``), those a kill or an outage kept from their host.
_KEEP = 200
T = TypeVar("T")


class EpochLog:
    """JSON files ``<dir>/<epoch>.plan.json`` and ``<dir>/<epoch>.outcome.json``."""

    def __init__(self, directory: str) -> None:
        self._dir = directory
        os.makedirs(directory, exist_ok=True)

    def _path(self, epoch: int, kind: str) -> str:
        return os.path.join(self._dir, f"{epoch:012d}.{kind}.json")

    def _read(self, epoch: int, kind: str) -> object:
        path = self._path(epoch, kind)
        try:
            with open(path, encoding="utf-8") as handle:
                return json.load(handle)
        except FileNotFoundError:
            return None
        except ValueError as error:
            raise MalformedPlan(f"epoch log {path}: not JSON: {error}") from None

    def plan(self, epoch: int) -> EpochPlan | None:
        """The plan logged for ``epoch``, if any."""
        doc = self._read(epoch, "plan")
        return None if doc is None else self._parsed(epoch, "plan", EpochPlan.from_json, doc)

    def write_plan(self, plan: EpochPlan) -> None:
        """Logs the plan of its epoch durably (fsync + rename)."""
        write_json(self._path(plan.epoch, "plan"), plan.to_json())
        self._prune(plan.epoch)

    def outcome(self, epoch: int) -> EpochOutcome | None:
        """The outcome logged for ``epoch``, if any."""
        doc = self._read(epoch, "outcome")
        return None if doc is None else self._parsed(epoch, "outcome", EpochOutcome.from_json,
                                                     doc)

    def write_outcome(self, epoch: int, outcome: EpochOutcome) -> None:
        """Logs what ``epoch`` observed."""
        write_json(self._path(epoch, "outcome"), outcome.to_json())

    def _parsed(self, epoch: int, kind: str, parse: Callable[[object], T], doc: object) -> T:
        try:
            return parse(doc)
        except MalformedPlan as error:
            raise MalformedPlan(f"epoch log {self._path(epoch, kind)}: {error}") from None

    def files_taken(self, op_id: str) -> set[str]:
        """The files every epoch so far took of directory source ``op_id``: those recorded,
        and those of the kept plans (a plan logged just before a crash may not be)."""
        taken: set[str] = set()
        path = self._files_path(op_id)
        with contextlib.suppress(FileNotFoundError), open(path, encoding="utf-8") as handle:
            taken.update(line.rstrip("\n") for line in handle if line.strip())
        for epoch in self._epochs("plan"):
            plan = self.plan(epoch)
            part = None if plan is None else plan.sources.get(op_id)
            if isinstance(part, FilesTaken):
                taken.update(part.files)
        return taken

    def record_files(self, op_id: str, files: Iterable[str]) -> None:
        """Records files a logged plan took of ``op_id`` (kept beyond the plans' pruning)."""
        with open(self._files_path(op_id), "a", encoding="utf-8") as handle:
            handle.writelines(f"{name}\n" for name in files)

    def _files_path(self, op_id: str) -> str:
        return os.path.join(self._dir, f"files-{op_id}.txt")

    def ended_acks(self) -> list[tuple[int, list[Ack], float]]:
        """The acks of every kept epoch that ended (its outcome logged), oldest first, each
        with when its outcome was logged (epoch ms: the epoch's end, to a millisecond)."""
        ended = []
        for epoch in self._epochs("outcome"):
            plan = self.plan(epoch)
            if plan and plan.acks:
                try:
                    logged_s = os.stat(self._path(epoch, "outcome")).st_mtime
                except FileNotFoundError:
                    continue  # pruned meanwhile
                ended.append((epoch, list(plan.acks), logged_s * 1000.0))
        return ended

    def _epochs(self, kind: str) -> list[int]:
        """The epochs with a ``kind`` file, oldest first."""
        suffix = f".{kind}.json"
        return sorted(int(name[: -len(suffix)]) for name in os.listdir(self._dir)
                      if name.endswith(suffix) and name[: -len(suffix)].isdigit())

    def latest_plan(self, before: int) -> EpochPlan | None:
        """The most recent plan of an epoch < ``before``."""
        plans = (self.plan(epoch) for epoch in reversed(self._epochs("plan")) if epoch < before)
        return next((plan for plan in plans if plan is not None), None)

    def _prune(self, epoch: int) -> None:
        for name in os.listdir(self._dir):
            number = name.split(".")[0]
            if number.isdigit() and int(number) < epoch - _KEEP:
                os.remove(os.path.join(self._dir, name))
