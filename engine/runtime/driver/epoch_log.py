"""The run's epoch log in the checkpoint directory, next to Spark's own.

Before epoch e runs, its plan (assignment and params of every operator, watermarks, the
control cursor and the acks of commands taking effect) is written; after it runs, its
outcome (max event time, key-group loads). A replayed epoch reuses its plan, so it runs
with exactly the configuration of the first attempt.
"""

from __future__ import annotations

import json
import os
from typing import Any

from engine.runtime.control.messages import Ack

# Epochs of history kept: a replay needs the last two; a start delivers the acks of all kept
# again (``ended_acks``), those a kill or an outage kept from their host.
_KEEP = 200


class EpochLog:
    """JSON files ``<dir>/<epoch>.plan.json`` and ``<dir>/<epoch>.outcome.json``."""

    def __init__(self, directory: str) -> None:
        self._dir = directory
        os.makedirs(directory, exist_ok=True)

    def _path(self, epoch: int, kind: str) -> str:
        return os.path.join(self._dir, f"{epoch:012d}.{kind}.json")

    def _read(self, epoch: int, kind: str) -> dict[str, Any] | None:
        try:
            with open(self._path(epoch, kind), encoding="utf-8") as handle:
                return json.load(handle)
        except FileNotFoundError:
            return None

    def _write(self, epoch: int, kind: str, doc: dict[str, Any]) -> None:
        path = self._path(epoch, kind)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(doc, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    def plan(self, epoch: int) -> dict[str, Any] | None:
        """The plan logged for ``epoch``, if any."""
        return self._read(epoch, "plan")

    def write_plan(self, epoch: int, plan: dict[str, Any]) -> None:
        """Logs the plan of ``epoch`` durably (fsync + rename)."""
        self._write(epoch, "plan", plan)
        self._prune(epoch)

    def outcome(self, epoch: int) -> dict[str, Any] | None:
        """The outcome logged for ``epoch``, if any."""
        return self._read(epoch, "outcome")

    def write_outcome(self, epoch: int, outcome: dict[str, Any]) -> None:
        """Logs what ``epoch`` observed."""
        self._write(epoch, "outcome", outcome)

    def files_taken(self, op_id: str) -> set[str]:
        """The files every epoch so far took of directory source ``op_id``: those recorded,
        and those of the kept plans (a plan logged just before a crash may not be)."""
        taken: set[str] = set()
        try:
            with open(self._files_path(op_id), encoding="utf-8") as handle:
                taken.update(line.rstrip("\n") for line in handle if line.strip())
        except FileNotFoundError:
            pass
        for epoch in self._epochs("plan"):
            part = ((self.plan(epoch) or {}).get("sources") or {}).get(op_id)
            if isinstance(part, dict):
                taken.update(part.get("files") or [])
        return taken

    def record_files(self, op_id: str, files: list[str]) -> None:
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
            if plan and plan.get("acks"):
                try:
                    logged_s = os.stat(self._path(epoch, "outcome")).st_mtime
                except FileNotFoundError:
                    continue  # pruned meanwhile
                ended.append((epoch, [Ack.from_dict(a) for a in plan["acks"]],
                              logged_s * 1000.0))
        return ended

    def _epochs(self, kind: str) -> list[int]:
        """The epochs with a ``kind`` file, oldest first."""
        suffix = f".{kind}.json"
        return sorted(int(name[: -len(suffix)]) for name in os.listdir(self._dir)
                      if name.endswith(suffix) and name[: -len(suffix)].isdigit())

    def latest_plan(self, before: int) -> tuple[int, dict[str, Any]] | None:
        """The most recent plan of an epoch < ``before``."""
        epochs = [epoch for epoch in self._epochs("plan") if epoch < before]
        for epoch in reversed(epochs):
            plan = self.plan(epoch)
            if plan is not None:
                return epoch, plan
        return None

    def _prune(self, epoch: int) -> None:
        for name in os.listdir(self._dir):
            number = name.split(".")[0]
            if number.isdigit() and int(number) < epoch - _KEEP:
                os.remove(os.path.join(self._dir, name))
