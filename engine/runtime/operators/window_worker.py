"""One VSN instance of a ``window_aggregate`` for one epoch.

An entry is one (key, window): its key the group's keys and the window's end, its timer
the window's end, its value the partial aggregates. The instance puts its input's partials
as deltas without reading the stored ones (the store folds an entry's versions with
``folding`` when it merges runs and when the window fires), reads the entries of the
windows the watermark closes (its groups' due timers), never whole key groups, and emits
them; each key group commits atomically with its mark and the rows it emitted. An epoch
costs its input and the windows it closes, whatever the size of the state.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.operators.columns import KG
from engine.runtime.operators.entries import check_types, decode, encode
from engine.runtime.operators.replay import emitted_rows, replay_of
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
from engine.runtime.state.base import FIELD, TIMER, VALUE, Combine, KeyedChanges
from engine.runtime.state.base import KG as ENTRY_KG
from engine.runtime.state.sorted_runs import one_chunk


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
    replay = replay_of(task, report, store)
    partials = replay.pending(input_partials(task, table, report))
    outputs = list(replay.emitted)
    live = sorted(set(replay.owned) - set(replay.done))
    combine = folding(spec, task.state_schema)
    closed = _closed(task, store, live, combine)
    changes = _changes(spec, partials, closed, task.watermark_us)
    report.bytes_written += store.commit_entries(op, task.epoch, changes, combine)
    if closed is not None:
        outputs.append(closed.drop_columns([KG]))
    emitted = emitted_rows(outputs, report)
    return None if emitted is None else finalize(spec, emitted)


def input_partials(task: Any, table: pa.Table | None, report: Any) -> pa.Table | None:
    """The input rows as partials per (kg, key, window), late ones dropped; fills the
    report's input counts."""
    if table is None or table.num_rows == 0:
        return None
    partials = partials_from_rows(task.spec, table)
    report.rows_in = table.num_rows  # rows, not rows times the sliding windows they fall in
    report.max_event_us = pc.max(partials[MAX_EVENT]).as_py()
    partials = drop_late(partials, task.watermark_us)
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
    column = one_chunk(column)
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


def _as_partials(task: Any, entries: pa.Table) -> pa.Table:
    """Entries as partial rows: kg, keys, window bounds, partial columns."""
    spec: WindowSpec = task.spec
    schema: pa.Schema = task.state_schema
    keys = decode(entries[FIELD], _key_schema(spec, schema))
    values = decode(entries[VALUE], pa.schema([schema.field(p.name) for p in spec.partials]))
    end = entries[TIMER]
    start = pc.subtract(end, pa.scalar(spec.window_us, pa.int64()))
    return pa.table({KG: entries[ENTRY_KG], **{k: keys[k] for k in spec.keys},
                     WINDOW_START: start, WINDOW_END: end,
                     **{p.name: values[p.name] for p in spec.partials}})


_SLOT = "@slot"


def _key_schema(spec: WindowSpec, state_schema: pa.Schema) -> pa.Schema:
    """What an entry's key holds: the group's keys and the window's slot (its start over
    the slide: shorter than its end, which the entry's timer holds)."""
    return pa.schema([*(state_schema.field(k) for k in spec.keys), (_SLOT, pa.int64())])


def _changes(
    spec: WindowSpec, partials: pa.Table | None, closed: pa.Table | None, watermark: int | None
) -> dict[int, KeyedChanges]:
    """Per key group: the input's partials put, the windows closed (their entries expired
    with the watermark) and the emitted rows."""
    puts = slices_by_group(_entries(spec, partials)) if partials is not None else {}
    fired = slices_by_group(closed) if closed is not None else {}
    return {
        kg: KeyedChanges(
            puts=puts[kg].drop_columns([KG]) if kg in puts else None,
            expire=watermark if kg in fired else None,
            emitted=fired[kg].drop_columns([KG]) if kg in fired else None,
        )
        for kg in sorted(set(puts) | set(fired))
    }


def _entries(spec: WindowSpec, partials: pa.Table) -> pa.Table:
    slots = pc.divide(partials[WINDOW_START].cast(pa.int64()), spec.slide_us)
    keys = pa.table({**{k: partials[k] for k in spec.keys}, _SLOT: slots})
    return pa.table(
        {
            KG: partials[KG],
            TIMER: partials[WINDOW_END].cast(pa.int64()),
            FIELD: encode(keys, keys.column_names),
            VALUE: encode(partials, [p.name for p in spec.partials]),
        }
    )
