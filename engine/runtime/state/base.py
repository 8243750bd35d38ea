"""The state store contract and the picklable spec Spark workers open stores from.

Two layouts, both addressed by (operator, key group), never by instance:

- whole groups: a key group's state is one Arrow table written atomically together with
  the epoch that produced it. The table also carries the rows that epoch emitted (flag
  column ``__emitted``), so a replayed epoch returns the same output without touching
  the state.
- keyed entries (``keyed.py``): entries addressed by (operator, key group, timer, field),
  read by key and by due timer, of which an epoch writes only what changed, committed
  per key group together with the group's mark (the epoch) and the rows it emitted.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from engine.runtime.state.keyed import KeyedEntries

EMITTED = "__emitted"


@dataclass(frozen=True)
class GroupState:
    """What a key group holds: the epoch that last wrote it and its table."""

    epoch: int
    table: pa.Table


@dataclass(frozen=True)
class StoreSpec:
    """How to open a store: ``kind`` is ``sqlite`` or ``files`` (``location`` a directory),
    ``redis`` (``location`` a redis:// URL) or ``memory``; ``namespace`` separates runs."""

    kind: str
    location: str
    namespace: str = "default"


class StateStore(KeyedEntries, ABC):
    """Per-(operator, key group) state with atomic, epoch-carrying writes."""

    # Whether window aggregates keep keyed entries here (else whole groups): chosen per
    # store by measurement (README, "State that follows the input").
    keyed_windows = False

    def keyed_windows_for(self, operator: str) -> bool:
        """Whether ``operator``'s windows keep keyed entries: the store's choice, unless the
        operator already holds whole groups here (a run started before the store chose
        keyed entries goes on in the layout its state is in)."""
        return self.keyed_windows and not self.holds_whole_groups(operator)

    def holds_whole_groups(self, operator: str) -> bool:
        """Whether ``operator`` holds any whole-group state (stores whose keyed entries are
        kept apart from whole groups answer it; by default, none is)."""
        return False

    @abstractmethod
    def read_group(self, operator: str, key_group: int) -> GroupState | None:
        """The group's last written state, or None if it holds nothing."""

    @abstractmethod
    def write_group(self, operator: str, key_group: int, epoch: int, table: pa.Table) -> int:
        """Atomically replaces the group's state with ``table`` written by ``epoch``.

        Skipped if the stored epoch is already >= ``epoch`` (a replay); returns bytes written.
        """

    @abstractmethod
    def delete_group(self, operator: str, key_group: int) -> None:
        """Forgets a group whose state became empty."""

    def read_groups(self, operator: str, key_groups: Iterable[int]) -> dict[int, GroupState]:
        """The groups among ``key_groups`` that hold state (stores override this to read
        them in one round trip)."""
        found = {}
        for kg in key_groups:
            group = self.read_group(operator, kg)
            if group is not None:
                found[kg] = group
        return found

    def load_groups(self, operator: str, key_groups: Iterable[int]) -> dict[int, GroupState]:
        """``read_groups``, with the bytes read added to ``bytes_read`` (epoch metrics)."""
        groups = self.read_groups(operator, key_groups)
        self.bytes_read += sum(g.table.nbytes for g in groups.values())
        return groups

    def write_groups(
        self, operator: str, epoch: int, changes: Mapping[int, pa.Table | None]
    ) -> int:
        """One instance's changes of one epoch: a table replaces its group as
        ``write_group`` does, None deletes the group. Stores override this to apply them
        in one transaction or round trip. Returns the bytes written."""
        written = 0
        for kg, table in changes.items():
            if table is None:
                self.delete_group(operator, kg)
            else:
                written += self.write_group(operator, kg, epoch, table)
        return written

    @abstractmethod
    def groups(self, operator: str) -> set[int]:
        """The key groups of ``operator`` that hold state."""

    @abstractmethod
    def clear(self) -> None:
        """Removes everything in this store's namespace (tests and fresh runs)."""

    def hand_over(self, operator: str, moves: Sequence[tuple[int, int, int]]) -> int:
        """Gives key groups new owners, ``moves`` being (key group, old owner, new owner);
        returns the state bytes copied between owners to do it, and adds them to
        ``bytes_copied``. A group is copied only where its address depends on its owner."""
        copied = 0
        for kg, old, new in moves:
            if self.address(operator, kg, old) != self.address(operator, kg, new):
                copied += self.copy_group(operator, kg, old, new)
        self.bytes_copied = getattr(self, "bytes_copied", 0) + copied
        return copied

    def address(self, operator: str, key_group: int, owner: int) -> tuple[object, ...]:
        """Where a group's state lives. The VSN stores address state by (operator, key
        group), never by owner: an owner change leaves the state where it is."""
        return (operator, key_group)

    def copy_group(self, operator: str, key_group: int, old: int, new: int) -> int:
        """Copies a group from its old owner's address to the new one's; returns the bytes
        (only stores whose addresses depend on the owner need it)."""
        raise NotImplementedError(f"{type(self).__name__} addresses state by owner but "
                                  "cannot copy it")

    def state_bytes(self, operator: str) -> int:
        """Total bytes of the operator's state (for reports; may be approximate)."""
        total = 0
        for kg in self.groups(operator):
            group = self.read_group(operator, kg)
            if group is not None:
                total += group.table.nbytes
        return total


def table_to_bytes(table: pa.Table, epoch: int) -> bytes:
    """Serialises a table as Arrow IPC with the epoch in the schema metadata."""
    table = table.replace_schema_metadata({"epoch": str(epoch)})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def table_from_bytes(data: bytes) -> GroupState:
    """Inverse of ``table_to_bytes``."""
    table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    epoch = int((table.schema.metadata or {})[b"epoch"])
    return GroupState(epoch=epoch, table=table.replace_schema_metadata(None))


_OPEN: dict[StoreSpec, StateStore] = {}


def open_store(spec: StoreSpec) -> StateStore:
    """The store for ``spec``; one instance per process so workers reuse connections."""
    store = _OPEN.get(spec)
    if store is None:
        store = _build(spec)
        _OPEN[spec] = store
    return store


def _build(spec: StoreSpec) -> StateStore:
    if spec.kind == "files":
        from engine.runtime.state.files import FileStateStore

        return FileStateStore(spec.location, spec.namespace)
    if spec.kind == "sqlite":
        from engine.runtime.state.sqlite_store import SqliteStateStore

        return SqliteStateStore(spec.location, spec.namespace)
    if spec.kind == "redis":
        from engine.runtime.state.redis_store import RedisStateStore

        return RedisStateStore(spec.location, spec.namespace)
    if spec.kind == "memory":
        from engine.runtime.state.memory import MemoryStateStore

        return MemoryStateStore()
    raise ValueError(f"unknown state store kind {spec.kind!r}")
