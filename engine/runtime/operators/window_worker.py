"""One VSN instance of a ``window_aggregate`` for one epoch, on the keyed layout.

The instance reads the entries of the windows the watermark closes (its groups' due
timers), never whole key groups, emits the closed windows and writes back only the changed
entries and the fired timers, each key group atomically with its mark and the rows it
emitted. On the stores that fold deltas (``KeyedEntries.folds``: the embedded and the Redis
store) it puts its input's partials as deltas without reading the stored ones: the store
folds an entry's versions (``folding``) when it merges runs and when the window fires, so
an epoch costs its input, whatever the size of the state. Elsewhere it reads the entries
of the (key, window)s in its input and merges the input into them first.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.operators.columns import KG
from engine.runtime.operators.window_merge import (
    drop_late,
    finalize,
    partials_from_rows,
    slices_by_group,
)
from engine.runtime.operators.window_spec import (
    MAX_EVENT,
    ROWS,
    WINDOW_END,
    WINDOW_START,
    WindowSpec,
)
from engine.runtime.state import StateStore
from engine.runtime.state.entries import check_types, decode, encode
from engine.runtime.state.keyed import AT, FIELD, TIMER, VALUE, Combine, KeyedChanges
from engine.runtime.state.keyed import KG as ENTRY_KG


def window_state_schema(spec: WindowSpec, input_schema: pa.Schema) -> pa.Schema:
    """The keys and partials an entry holds, typed as ``partials_from_rows`` makes them
    from rows of ``input_schema``; raises EntryTypeError for a type entries cannot hold."""
    fields = [input_schema.field(k) for k in spec.keys]
    for partial in spec.partials:
        if partial.column is None or partial.func == "count":
            kind = pa.int64()
        else:
            source = input_schema.field(partial.column).type
            if partial.func == "sum":
                kind = pa.int64() if pa.types.is_integer(source) else pa.float64()
            else:
                kind = source
        fields.append(pa.field(partial.name, kind))
    schema = pa.schema(fields)
    check_types(schema, schema.names)
    return schema


def process_window_instance(
    task: Any, report: Any, table: pa.Table | None, store: StateStore
) -> pa.Table | None:
    """Merges the instance's input into its entries; returns the finalised emitted rows.
    ``task`` is a ``vsn_worker.EpochTask`` with a WindowSpec and its ``state_schema``."""
    spec: WindowSpec = task.spec
    op = spec.operator
    partials = input_partials(task, table, report)
    owned = [kg for kg, owner in enumerate(task.owners) if owner == report.instance]
    marks = store.marks(op, owned)
    replayed = sorted(kg for kg in owned if marks.get(kg, -1) >= task.epoch)
    outputs = list(store.read_emitted(op, replayed).values()) if replayed else []
    report.groups_replayed = len(replayed)
    if replayed and partials is not None:
        again = pc.is_in(partials[KG], pa.array(replayed, pa.int32()))
        partials = partials.filter(pc.invert(again))
    live = sorted(set(owned) - set(replayed))
    combine = folding(spec, task.state_schema) if store.folds(op) else None
    closed = _closed(task, store, live, combine)
    merged = _merged(task, store, partials, combine)
    changes = _changes(spec, merged, closed)
    report.bytes_written += store.commit_entries(op, task.epoch, changes, combine)
    report.groups_written += len(changes)
    if closed is not None and closed.num_rows:
        outputs.append(closed.drop_columns([KG]))
    outputs = [o for o in outputs if o.num_rows]
    if not outputs:
        return None
    names = outputs[0].column_names
    emitted = finalize(spec, pa.concat_tables([o.select(names) for o in outputs]))
    report.rows_out = emitted.num_rows
    return emitted


def input_partials(task: Any, table: pa.Table | None, report: Any) -> pa.Table | None:
    """The input rows as partials per (kg, key, window), late ones dropped; fills the
    report's input counts."""
    if table is None or table.num_rows == 0:
        return None
    partials = partials_from_rows(task.spec, table)
    report.rows_in = table.num_rows  # rows, not rows times the sliding windows they fall in
    report.max_event_us = pc.max(partials[MAX_EVENT]).as_py()
    partials = drop_late(partials, task.watermark_us)
    report.partials_in = partials.num_rows
    report.kg_rows = kg_rows(partials)
    return partials if partials.num_rows else None


def kg_rows(partials: pa.Table) -> dict[int, int]:
    """Input rows per key group (the loads a rebalance weighs), summed without a group-by."""
    if partials.num_rows == 0:
        return {}
    totals = np.bincount(partials[KG].to_numpy(), weights=partials[ROWS].to_numpy())
    return {int(kg): int(totals[kg]) for kg in np.flatnonzero(totals)}


def folding(spec: WindowSpec, state_schema: pa.Schema) -> Combine:
    """The ``Combine`` of the window's entries: the versions' partials decoded, merged per
    entry (each partial's sum, min or max; nulls left out, as a sum or min of nulls only is
    null) and encoded again."""
    schema = pa.schema([state_schema.field(p.name) for p in spec.partials])
    merges = [(p.name, p.merge) for p in spec.partials]

    def combine(values: pa.Array, entry: np.ndarray) -> pa.Array:
        decoded = decode(values, schema)
        starts = np.flatnonzero(np.diff(entry, prepend=-1))
        folded = [_folded(decoded[name], merge, entry, starts) for name, merge in merges]
        return encode(pa.Table.from_arrays(folded, schema=schema), schema.names)

    return combine


_UFUNCS = {"sum": np.add, "min": np.minimum, "max": np.maximum}


def _folded(column: pa.Array, merge: str, entry: np.ndarray, starts: np.ndarray) -> pa.Array:
    """``column``'s values merged per entry (``entry`` sorted, ``starts`` where each entry's
    rows start): a NumPy ``reduceat`` for numbers, Arrow's grouped aggregate otherwise."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kind = column.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        table = pa.table({merge: column, _ENTRY: pa.array(entry, pa.int64())})
        grouped = table.group_by(_ENTRY, use_threads=False).aggregate([(merge, merge)])
        return grouped.sort_by(_ENTRY)[f"{merge}_{merge}"].combine_chunks().cast(kind)
    ufunc = _UFUNCS[merge]
    if not column.null_count:
        return pa.array(ufunc.reduceat(column.to_numpy(), starts), kind)
    # Nulls are left out: filled with the merge's identity, and an entry of nulls only is null.
    info = np.finfo if pa.types.is_floating(kind) else np.iinfo
    identity = {"sum": 0, "min": info(kind.to_pandas_dtype()).max,
                "max": info(kind.to_pandas_dtype()).min}[merge]
    values = pc.fill_null(column, pa.scalar(identity, kind)).to_numpy()
    valid = np.logical_or.reduceat(column.is_valid().to_numpy(zero_copy_only=False), starts)
    return pa.array(ufunc.reduceat(values, starts), kind, mask=~valid)


_ENTRY = "@entry"


def _closed(
    task: Any, store: StateStore, live: list[int], combine: Combine | None
) -> pa.Table | None:
    """The partial rows of the windows the watermark closes (the groups' due timers)."""
    if task.watermark_us is None or not live:
        return None
    due = store.fire_timers(task.spec.operator, live, task.watermark_us, combine)
    return _as_partials(task, due) if due.num_rows else None


def _merged(
    task: Any, store: StateStore, partials: pa.Table | None, combine: Combine | None
) -> pa.Table | None:
    """The input's partials merged with the stored entries of the same (key, window)s; as
    they are, to be put as deltas, with ``combine``."""
    if partials is None:
        return None
    spec: WindowSpec = task.spec
    fields = _field(spec, partials)
    if combine is not None:
        return partials.append_column(FIELD, fields)
    wanted = pa.table({ENTRY_KG: partials[KG], TIMER: partials[WINDOW_END], FIELD: fields})
    # Each stored entry answers one of the input's rows (``AT``): merged there, the keys
    # neither decoded nor encoded again, nor a group-by to find them.
    stored = store.read_entries(spec.operator, wanted)
    return _merged_at(task, partials, stored).append_column(FIELD, fields)


_MERGES = {"sum": pc.add, "min": pc.min_element_wise, "max": pc.max_element_wise}


def _merged_at(task: Any, partials: pa.Table, stored: pa.Table) -> pa.Table:
    """``partials`` with the stored values (``VALUE`` at ``AT``) merged into their rows; a
    null on either side (a sum or min of nulls only) keeps the other side."""
    if stored.num_rows == 0:
        return partials
    spec: WindowSpec = task.spec
    schema: pa.Schema = task.state_schema
    # In the input's row order, as ``replace_with_mask`` takes its replacements: each row
    # is found at most once, so placing them in a row-long array sorts them.
    rows = stored[AT].to_numpy()
    slot = np.full(partials.num_rows, -1, np.int64)
    slot[rows] = np.arange(len(rows))
    order = slot[slot >= 0]
    at = pa.array(rows[order])
    values = decode(stored[VALUE].take(pa.array(order)),
                    pa.schema([schema.field(p.name) for p in spec.partials]))
    mask = np.zeros(partials.num_rows, dtype=bool)
    mask[rows] = True
    mask_array = pa.array(mask)
    for partial in spec.partials:
        column = partials[partial.name].combine_chunks()
        mine = pc.take(column, at)
        theirs = values[partial.name].cast(column.type)
        both = _MERGES[partial.merge](mine, theirs)
        both = pc.if_else(pc.is_null(mine), theirs, pc.if_else(pc.is_null(theirs), mine, both))
        if isinstance(both, pa.ChunkedArray):
            both = both.combine_chunks()
        merged = pc.replace_with_mask(column, mask_array, both)
        partials = partials.set_column(partials.schema.get_field_index(partial.name),
                                       partial.name, merged)
    return partials


def _as_partials(task: Any, entries: pa.Table) -> pa.Table:
    """Entries as partial rows: kg, keys, window bounds, partial columns."""
    spec: WindowSpec = task.spec
    schema: pa.Schema = task.state_schema
    keys = decode(entries[FIELD], pa.schema([schema.field(k) for k in spec.keys]))
    values = decode(entries[VALUE], pa.schema([schema.field(p.name) for p in spec.partials]))
    end = entries[TIMER]
    start = pc.subtract(end, pa.scalar(spec.window_us, pa.int64()))
    columns = {KG: entries[ENTRY_KG]}
    columns.update({k: keys[k] for k in spec.keys})
    columns.update({WINDOW_START: start, WINDOW_END: end})
    columns.update({p.name: values[p.name] for p in spec.partials})
    return pa.table(columns)


def _field(spec: WindowSpec, rows: pa.Table) -> pa.Array:
    if not spec.keys:
        return pa.array([""] * rows.num_rows, pa.string())
    return encode(rows, list(spec.keys))


def _changes(
    spec: WindowSpec, merged: pa.Table | None, closed: pa.Table | None
) -> dict[int, KeyedChanges]:
    """Per key group: the changed entries, the fired timers and the emitted rows."""
    puts = slices_by_group(_entries(spec, merged)) if merged is not None else {}
    fired = slices_by_group(closed) if closed is not None else {}
    changes = {}
    for kg in sorted(set(puts) | set(fired)):
        emitted = fired.get(kg)
        changes[kg] = KeyedChanges(
            puts=puts[kg].drop_columns([KG]) if kg in puts else None,
            fired=tuple(sorted(set(emitted[WINDOW_END].to_pylist())))
            if emitted is not None
            else (),
            emitted=emitted.drop_columns([KG]) if emitted is not None else None,
        )
    return changes


def _entries(spec: WindowSpec, merged: pa.Table) -> pa.Table:
    return pa.table(
        {
            KG: merged[KG],
            TIMER: merged[WINDOW_END],
            FIELD: merged[FIELD],
            VALUE: encode(merged, [p.name for p in spec.partials]),
        }
    )
