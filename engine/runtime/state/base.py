"""The state store contract: one layout for every keyed operator's state.

State is addressed by (operator, key group, key): an entry is a key (``FIELD``, the key's
columns encoded by ``entries.encode``) with its value (``VALUE``) and its timer (``TIMER``:
when the entry is due, as a window's end, or expires, as a remembered key's time plus its
bound). An instance reads the entries of the keys in its epoch's input (``read_entries``)
and, for windows, those whose timers are due (``fire_timers``), never a whole key group.

A commit writes per key group only what changed (entries put, and every entry whose timer
is at or before ``KeyedChanges.expire`` dropped) and, in the same atomic step, the group's
mark (the epoch) and the rows the epoch emitted: a replayed epoch finds the mark and
re-emits those rows (``read_emitted``) instead of applying the epoch twice.

An operator whose entries fold (a window's partial aggregates) puts them as deltas with a
``Combine``: the store folds an entry's versions into one when it merges them or fires its
timer, so an epoch puts its input's partials without reading the stored ones.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

KG = "kg"
TIMER = "timer"
FIELD = "field"
VALUE = "value"
ENTRIES = pa.schema(
    [(KG, pa.int32()), (TIMER, pa.int64()), (FIELD, pa.string()), (VALUE, pa.string())]
)

Combine = Callable[[pa.Array, np.ndarray], pa.Array]
"""Folds the versions of entries into one value each: (the versions' values, the entry
each belongs to: 0, 1, ... in order) -> one value per entry. Commutative and associative,
as a sum, a min or a max is: versions meet in any grouping and order."""


@dataclass(frozen=True)
class KeyedChanges:
    """One key group's changes of one epoch: entries put (``TIMER``, ``FIELD``, ``VALUE``),
    the entries whose timers are at or before ``expire`` dropped (before the puts), and the
    rows the epoch emitted."""

    puts: pa.Table | None = None
    expire: int | None = None
    emitted: pa.Table | None = None


@dataclass(frozen=True)
class StoreSpec:
    """How to open a store: ``kind`` is ``sqlite`` (``location`` a directory), ``redis``
    (``location`` a redis:// URL) or ``memory``; ``namespace`` separates runs."""

    kind: str
    location: str
    namespace: str = "default"


@dataclass(frozen=True)
class StateSize:
    """What a store holds: its bytes (on disk or in the server's memory), its entries (each
    version of an entry counted until the store folds it) and its key groups with entries."""

    bytes: int
    entries: int
    key_groups: int


class StateStore(ABC):
    """Keyed entries per (operator, key group), committed atomically with the group's mark.

    An entry's timer may move later with a put, never earlier; ``fire_timers`` is for
    operators whose entries keep their timer (a window's end)."""

    bytes_read = 0  # state bytes this process read from the store (for epoch metrics)

    @abstractmethod
    def marks(self, operator: str, key_groups: Iterable[int]) -> dict[int, int]:
        """The epoch of each group's last commit (groups without one are left out)."""

    @abstractmethod
    def read_entries(self, operator: str, wanted: pa.Table) -> pa.Table:
        """The stored entries (``ENTRIES``) of the keys ``wanted`` (``KG``, ``FIELD``)."""

    @abstractmethod
    def fire_timers(
        self, operator: str, key_groups: Iterable[int], until: int, combine: Combine | None = None
    ) -> pa.Table:
        """Every entry of the groups whose timer is at or before ``until`` (its versions
        folded by ``combine``): ``ENTRIES``."""

    @abstractmethod
    def read_emitted(self, operator: str, key_groups: Iterable[int]) -> dict[int, pa.Table]:
        """The rows each group's last commit emitted."""

    @abstractmethod
    def commit_entries(
        self,
        operator: str,
        epoch: int,
        changes: Mapping[int, KeyedChanges],
        combine: Combine | None = None,
    ) -> int:
        """Applies each group's changes with its mark, atomically per group, skipping
        groups whose mark is already ``epoch`` or later; returns the bytes written. With
        ``combine``, the puts are deltas folded into the entries' stored values."""

    @abstractmethod
    def groups(self, operator: str) -> set[int]:
        """The key groups of ``operator`` that hold entries."""

    @abstractmethod
    def size(self) -> StateSize:
        """What the store holds now, read from the store itself."""

    @abstractmethod
    def clear(self) -> None:
        """Removes everything in this store's namespace (tests and fresh runs)."""


def ipc_bytes(table: pa.Table) -> bytes:
    """A table as Arrow IPC stream bytes (the rows an epoch emitted)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def ipc_table(data: bytes) -> pa.Table:
    """Inverse of ``ipc_bytes``."""
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()
