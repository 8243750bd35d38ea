"""The keyed layout of the state stores: entries addressed by (operator, key group, timer,
field), where the timer is when the entry expires (a window's end) and the field names
the key (``entries.encode``).

An instance reads the entries of the keys in its epoch's input (``read_entries``) and
those whose timers are due at the watermark (``fire_timers``), never a whole key group.
A commit writes only what changed (entries put, timers fired with all their entries) and,
in the same atomic step per key group, the group's mark (the epoch) and the rows the epoch
emitted: a replayed epoch finds the mark and re-emits those rows (``read_emitted``).

An operator whose entries fold (a window's partial aggregates) may put them as deltas with
a ``Combine`` on the stores that can (``folds``): the store folds an entry's versions into
one when it merges them or fires its timer, so an epoch puts its input's partials without
reading the stored ones first.

The stores with a server or a file (SQLite, Redis) keep entries natively; this module's
defaults keep a key group's entries in one whole-group table (the files store).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

KG = "kg"
TIMER = "timer"
FIELD = "field"
VALUE = "value"
AT = "at"
"""A found entry's row among the wanted ones (``read_entries``): the caller merges by position
instead of matching keys again."""
ENTRIES = pa.schema(
    [(KG, pa.int32()), (TIMER, pa.int64()), (FIELD, pa.string()), (VALUE, pa.string())]
)
FOUND = ENTRIES.append(pa.field(AT, pa.int64()))
"""What ``read_entries`` answers: entries, each with its row among the wanted (``AT``)."""
_KEYED = "@keyed"

Combine = Callable[[pa.Array, np.ndarray], pa.Array]
"""Folds the versions of entries into one value each: (the versions' values, the entry
each belongs to: 0, 1, ... in order) -> one value per entry. Commutative and associative,
as a sum, a min or a max is: versions meet in any grouping and order."""


@dataclass(frozen=True)
class KeyedChanges:
    """One key group's changes of one epoch: entries put (``TIMER``, ``FIELD``, ``VALUE``),
    timers fired (their entries all deleted) and the rows the epoch emitted."""

    puts: pa.Table | None = None
    fired: tuple[int, ...] = ()
    emitted: pa.Table | None = None


def no_entries() -> pa.Table:
    """An empty entries table."""
    return ENTRIES.empty_table()


def found_among(wanted: pa.Table, entries: pa.Table) -> pa.Table:
    """``entries`` (some of ``wanted``'s ``KG``, ``TIMER``, ``FIELD``) with each one's row among
    ``wanted`` (``AT``), for layouts whose reads do not keep it."""
    keys = [KG, TIMER, FIELD]
    rows = pa.array(np.arange(wanted.num_rows, dtype=np.int64))
    return entries.join(wanted.select(keys).append_column(AT, rows), keys,
                        join_type="inner").select(FOUND.names)


def entries_table(
    kgs: list[int], timers: list[int], fields: list[Any], values: list[Any]
) -> pa.Table:
    """An entries table from parallel lists (fields and values as str or bytes)."""
    return pa.Table.from_arrays(
        [
            pa.array(kgs, pa.int32()),
            pa.array(timers, pa.int64()),
            _strings(fields),
            _strings(values),
        ],
        schema=ENTRIES,
    )


def _strings(values: list[Any]) -> pa.Array:
    if values and isinstance(values[0], bytes):
        return pa.array(values, pa.binary()).cast(pa.string())
    return pa.array(values, pa.string())


def slices_by(table: pa.Table, column: str) -> dict[int, pa.Table]:
    """The table cut into one slice per value of the integer ``column`` (sorted once,
    sliced without copies)."""
    if table.num_rows == 0:
        return {}
    values = table[column].to_numpy()
    order = np.argsort(values, kind="stable")
    ordered = table.take(pa.array(order))
    sorted_values = values[order]
    groups, starts = np.unique(sorted_values, return_index=True)
    ends = [*starts[1:].tolist(), len(sorted_values)]
    return {
        int(g): ordered.slice(s, e - s)
        for g, s, e in zip(groups.tolist(), starts.tolist(), ends, strict=True)
    }


def by_group_and_timer(wanted: pa.Table) -> dict[tuple[int, int], list[str]]:
    """Wanted fields (``KG``, ``TIMER``, ``FIELD``) grouped by (key group, timer)."""
    grouped = wanted.group_by([KG, TIMER], use_threads=False).aggregate([(FIELD, "list")])
    return {
        (kg, timer): names
        for kg, timer, names in zip(
            grouped[KG].to_pylist(),
            grouped[TIMER].to_pylist(),
            grouped[f"{FIELD}_list"].to_pylist(),
            strict=True,
        )
    }


def ipc_bytes(table: pa.Table) -> bytes:
    """A table as Arrow IPC stream bytes (the rows an epoch emitted)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def ipc_table(data: bytes) -> pa.Table:
    """Inverse of ``ipc_bytes``."""
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


class KeyedEntries:
    """The keyed layout's operations; the defaults keep each key group's entries as one
    whole-group table (``read_groups``/``write_groups`` of the store)."""

    bytes_read = 0  # state bytes this process read from the store (for epoch metrics)

    def folds(self, operator: str) -> bool:
        """Whether ``operator``'s entries may be put as deltas with a ``Combine``
        (``commit_entries`` and ``fire_timers`` given one): not in this layout."""
        return False

    def marks(self, operator: str, key_groups: Iterable[int]) -> dict[int, int]:
        """The epoch of each group's last keyed commit (groups without one are left out)."""
        groups = self._whole(operator, key_groups)
        return {kg: group.epoch for kg, group in groups.items()}

    def read_entries(self, operator: str, wanted: pa.Table) -> pa.Table:
        """The stored entries among ``wanted`` (``KG``, ``TIMER``, ``FIELD``), each with its
        row there (``AT``)."""
        stored = self._all_entries(operator, set(wanted[KG].to_pylist()))
        return found_among(wanted, stored)

    def fire_timers(
        self, operator: str, key_groups: Iterable[int], until: int, combine: Combine | None = None
    ) -> pa.Table:
        """Every entry of the groups' timers at or before ``until`` (its versions folded by
        ``combine``, where the layout ``folds``)."""
        refuse_folding(self, operator, combine)
        stored = self._all_entries(operator, set(key_groups))
        return stored.filter(pc.less_equal(stored[TIMER], until))

    def read_emitted(self, operator: str, key_groups: Iterable[int]) -> dict[int, pa.Table]:
        """The rows each group's last keyed commit emitted."""
        found = {}
        for kg, group in self._whole(operator, key_groups).items():
            rows = group.table.filter(pc.is_null(group.table[TIMER]))
            data = rows[VALUE][0].as_py() if rows.num_rows else None
            if data:
                found[kg] = ipc_table(data)
        return found

    def commit_entries(
        self,
        operator: str,
        epoch: int,
        changes: Mapping[int, KeyedChanges],
        combine: Combine | None = None,
    ) -> int:
        """Applies each group's changes with its mark, atomically per group, skipping
        groups whose mark is already ``epoch`` or later. Returns the bytes written. With
        ``combine`` (where the layout ``folds``), the puts are deltas: each folds into the
        entry's stored value instead of replacing it."""
        refuse_folding(self, operator, combine)
        groups = self._whole(operator, changes)
        tables: dict[int, pa.Table | None] = {}
        for kg, change in changes.items():
            group = groups.get(kg)
            if group is not None and group.epoch >= epoch:
                continue
            kept = group.table.filter(pc.is_valid(group.table[TIMER])) if group else None
            tables[kg] = _whole_table(kept, change)
        store: Any = self
        return int(store.write_groups(operator + _KEYED, epoch, tables))

    def _whole(self, operator: str, key_groups: Iterable[int]) -> dict[int, Any]:
        store: Any = self
        return store.load_groups(operator + _KEYED, key_groups)

    def _all_entries(self, operator: str, key_groups: set[int]) -> pa.Table:
        parts = []
        for kg, group in self._whole(operator, key_groups).items():
            rows = group.table.filter(pc.is_valid(group.table[TIMER]))
            kgs = pa.array([kg] * rows.num_rows, pa.int32())
            parts.append(
                pa.Table.from_arrays(
                    [kgs, rows[TIMER], rows[FIELD], rows[VALUE].cast(pa.string())], schema=ENTRIES
                )
            )
        return pa.concat_tables(parts) if parts else no_entries()


def refuse_folding(entries: KeyedEntries, operator: str, combine: Combine | None) -> None:
    """Raises if ``combine`` is given to a layout that does not fold ``operator``'s entries."""
    if combine is not None and not entries.folds(operator):
        raise ValueError(f"the state of {operator!r} is in a layout that cannot fold deltas")


_WHOLE = pa.schema([(TIMER, pa.int64()), (FIELD, pa.string()), (VALUE, pa.binary())])


def _whole_table(kept: pa.Table | None, change: KeyedChanges) -> pa.Table:
    """A group's entries after ``change``, plus one row (null timer) with its emitted rows."""
    parts = []
    if kept is not None and kept.num_rows:
        kept = kept.filter(pc.invert(pc.is_in(kept[TIMER], pa.array(change.fired, pa.int64()))))
        if change.puts is not None and change.puts.num_rows:
            replaced = pc.is_in(
                pc.binary_join_element_wise(pc.cast(kept[TIMER], pa.string()), kept[FIELD], "|"),
                pc.binary_join_element_wise(
                    pc.cast(change.puts[TIMER], pa.string()), change.puts[FIELD], "|"
                ),
            )
            kept = kept.filter(pc.invert(replaced))
        parts.append(kept.cast(_WHOLE))
    if change.puts is not None and change.puts.num_rows:
        parts.append(change.puts.select(_WHOLE.names).cast(_WHOLE))
    emitted = ipc_bytes(change.emitted) if change.emitted is not None else b""
    parts.append(
        pa.table(
            {
                TIMER: pa.nulls(1, pa.int64()),
                FIELD: pa.nulls(1, pa.string()),
                VALUE: pa.array([emitted], pa.binary()),
            },
            schema=_WHOLE,
        )
    )
    return pa.concat_tables(parts)
