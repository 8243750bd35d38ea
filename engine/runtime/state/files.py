"""Embedded state store: one Arrow IPC file per (operator, key group) in a directory.

Shared by every Spark Python worker on the machine without a server. A write goes to a
temporary file then ``os.replace``, so readers see the old or the new group, never a mix.
Only one task writes a key group per epoch (the VSN assignment), so no locks are needed.
"""

from __future__ import annotations

import os
import shutil
import uuid

import pyarrow as pa

from engine.runtime.state.base import GroupState, StateStore


class FileStateStore(StateStore):
    """Key-group files under ``<root>/<namespace>/<operator>/kg-<n>.arrow``."""

    def __init__(self, root: str, namespace: str) -> None:
        self._root = os.path.join(root, namespace)

    def _dir(self, operator: str) -> str:
        return os.path.join(self._root, operator)

    def _path(self, operator: str, key_group: int) -> str:
        return os.path.join(self._dir(operator), f"kg-{key_group:05d}.arrow")

    def read_group(self, operator: str, key_group: int) -> GroupState | None:
        """The group's table, read with a memory map (no copy)."""
        try:
            with pa.memory_map(self._path(operator, key_group)) as source:
                table = pa.ipc.open_file(source).read_all()
        except FileNotFoundError:
            return None
        epoch = int((table.schema.metadata or {})[b"epoch"])
        return GroupState(epoch=epoch, table=table.replace_schema_metadata(None))

    def stored_epoch(self, operator: str, key_group: int) -> int | None:
        """The epoch of the group's last write, reading only the file footer."""
        try:
            with pa.memory_map(self._path(operator, key_group)) as source:
                meta = pa.ipc.open_file(source).schema.metadata or {}
        except FileNotFoundError:
            return None
        return int(meta[b"epoch"])

    def write_group(self, operator: str, key_group: int, epoch: int, table: pa.Table) -> int:
        """Writes temp + rename; skipped when the group already has ``epoch`` or later."""
        stored = self.stored_epoch(operator, key_group)
        if stored is not None and stored >= epoch:
            return 0
        path = self._path(operator, key_group)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        table = table.replace_schema_metadata({"epoch": str(epoch)})
        with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        size = os.path.getsize(tmp)
        os.replace(tmp, path)
        return size

    def delete_group(self, operator: str, key_group: int) -> None:
        """Removes the group's file if present."""
        try:
            os.remove(self._path(operator, key_group))
        except FileNotFoundError:
            pass

    def groups(self, operator: str) -> set[int]:
        """Key groups with a state file."""
        try:
            names = os.listdir(self._dir(operator))
        except FileNotFoundError:
            return set()
        return {int(n[3:8]) for n in names if n.startswith("kg-") and n.endswith(".arrow")}

    def clear(self) -> None:
        """Deletes the namespace directory."""
        shutil.rmtree(self._root, ignore_errors=True)

    def state_bytes(self, operator: str) -> int:
        """Sum of the operator's file sizes."""
        return sum(os.path.getsize(self._path(operator, kg)) for kg in self.groups(operator))
