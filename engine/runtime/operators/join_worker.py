"""One VSN instance of a ``join`` operator for one epoch (runs in a Python worker).

An entry is one key: its value the rows of both sides buffered for it (``encode_rows``),
its timer the moment the watermark expires the last of them. The instance reads the
entries of its input's keys only, matches the arrivals against them and each other, and
puts back the keys that arrived, without the rows the watermark expired; each key group
that had input commits atomically with its mark, the pairs it emitted and the expiry of
every key whose rows all expired. A key group without input is neither read nor written:
its expired keys go with its next input's commit (or a merge), and a future row never
matches them anyway (``unexpired``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.operators.columns import KG, TIME_US
from engine.runtime.operators.entries import ROW, check_types, decode, encode
from engine.runtime.operators.join import JoinSpec, new_pairs, side_maxima, unexpired, usable_rows
from engine.runtime.operators.replay import emitted_rows, replay_of
from engine.runtime.operators.window_merge import slices_by_group
from engine.runtime.state import KeyedChanges, StateStore
from engine.runtime.state.base import FIELD, TIMER, VALUE
from engine.runtime.state.base import KG as ENTRY_KG


def process_join_instance(
    task: Any, report: Any, table: pa.Table | None, store: StateStore
) -> pa.Table | None:
    """Matches this epoch's rows of the instance's key groups against each other and the
    buffered ones, updates the buffers; returns the emitted pairs.

    ``task`` is a ``vsn_worker.EpochTask`` whose spec is a JoinSpec.
    """
    spec: JoinSpec = task.spec
    replay = replay_of(task, report, store)
    arrived = replay.pending(_arrivals(task, report, table))
    outputs = [t.select(spec.output_columns) for t in replay.emitted]
    if arrived is not None and arrived.num_rows:
        columns = [c for c in arrived.column_names if c != KG]
        check_types(arrived.schema, columns)
        fields = encode(arrived, list(spec.keys))
        buffered = _buffered(store, spec.operator, arrived, fields, columns)
        pairs = new_pairs(spec, buffered, arrived)
        every = pa.concat_tables([buffered, arrived]) if buffered is not None else arrived
        changes = _changes(spec, task.watermark_us, every, pairs, columns)
        report.bytes_written += store.commit_entries(spec.operator, task.epoch, changes)
        outputs.append(pairs.drop_columns([KG]))
    return emitted_rows(outputs, report)


def _arrivals(task: Any, report: Any, table: pa.Table | None) -> pa.Table | None:
    """This epoch's usable rows; the report gets the input figures."""
    if table is None or table.num_rows == 0:
        return None
    report.rows_in = table.num_rows
    report.max_event_sides = side_maxima(table)
    known = [t for t in report.max_event_sides if t is not None]
    report.max_event_us = max(known) if known else None
    rows = usable_rows(task.spec, table, task.watermark_us)
    report.kg_rows = {kg: t.num_rows for kg, t in slices_by_group(rows).items()}
    return rows


def _buffered(
    store: StateStore, operator: str, arrived: pa.Table, fields: pa.Array, columns: list[str]
) -> pa.Table | None:
    """The rows buffered for the keys that arrived (read by key, nothing else)."""
    wanted = pa.table({ENTRY_KG: arrived[KG], FIELD: fields}).group_by(
        [ENTRY_KG, FIELD], use_threads=False).aggregate([])
    found = store.read_entries(operator, wanted)
    if found.num_rows == 0:
        return None
    split = pc.split_pattern(found[VALUE], ROW)
    rows = decode(pc.list_flatten(split), arrived.schema.remove(arrived.schema.get_field_index(KG)))
    kgs = pc.take(found[ENTRY_KG], pc.list_parent_indices(split))
    return rows.add_column(0, KG, kgs.cast(pa.int32())).select(arrived.column_names)


def _changes(
    spec: JoinSpec, watermark_us: int | None, rows: pa.Table, pairs: pa.Table, columns: list[str]
) -> dict[int, KeyedChanges]:
    """Per key group that had input: its keys' unexpired rows put, one entry per key, the
    keys whose rows all expired dropped, and its pairs."""
    kept = unexpired(spec, rows, watermark_us)
    keyed = kept.append_column(FIELD, encode(kept, list(spec.keys)))
    keyed = keyed.append_column(VALUE, encode(kept, columns))
    entries = keyed.group_by([KG, FIELD], use_threads=False).aggregate(
        [(VALUE, "list"), (TIME_US, "max")])
    # The key expires once its latest row does: a row older than watermark - within.
    timers = pc.add(entries[f"{TIME_US}_max"], spec.within_us + 1)
    puts = pa.table({KG: entries[KG], TIMER: timers.cast(pa.int64()), FIELD: entries[FIELD],
                     VALUE: pc.binary_join(entries[f"{VALUE}_list"], ROW)})
    by_group = slices_by_group(puts)
    emitted = slices_by_group(pairs)
    return {
        kg: KeyedChanges(
            puts=by_group[kg].drop_columns([KG]) if kg in by_group else None,
            expire=watermark_us,
            emitted=emitted[kg].drop_columns([KG]) if kg in emitted else pairs.slice(0, 0)
            .drop_columns([KG]),
        )
        for kg in sorted(set(np.unique(rows[KG].to_numpy()).tolist()))
    }
