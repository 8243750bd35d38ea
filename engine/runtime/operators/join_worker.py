"""One VSN instance of a ``join`` operator for one epoch (runs in a Python worker)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.operators.columns import KG
from engine.runtime.operators.join import JoinSpec, new_pairs, side_maxima, unexpired, usable_rows
from engine.runtime.operators.window_merge import slices_by_group
from engine.runtime.state import StateStore
from engine.runtime.state.base import EMITTED


def process_join_instance(
    task,  # type: ignore[no-untyped-def]
    report,
    table: pa.Table | None,
    store: StateStore,
) -> pa.Table | None:
    """Matches this epoch's rows of the instance's key groups against each other and the
    buffered ones, updates the buffers; returns the emitted pairs.

    ``task`` is a ``vsn_worker.EpochTask`` whose spec is a JoinSpec.
    """
    spec: JoinSpec = task.spec
    arrived_by_kg = _arrivals(task, report, table)
    owned = {kg for kg, owner in enumerate(task.owners) if owner == report.instance}
    touched = sorted(set(arrived_by_kg) | (store.groups(spec.operator) & owned))
    stored = store.load_groups(spec.operator, touched)
    outputs: list[pa.Table] = []
    live: list[int] = []
    buffered_parts: list[pa.Table] = []
    buffered_rows: dict[int, int] = {}
    for kg in touched:
        group = stored.get(kg)
        if group is not None and group.epoch >= task.epoch:
            report.groups_replayed += 1  # already applied: re-emit what it emitted then
            outputs.append(group.table.filter(group.table[EMITTED]).select(spec.output_columns))
            continue
        live.append(kg)
        if group is not None:
            rows = group.table.filter(pc.invert(group.table[EMITTED])).drop_columns([EMITTED])
            buffered_rows[kg] = rows.num_rows
            if rows.num_rows:
                kgs = pa.array(np.full(rows.num_rows, kg, dtype=np.int32))
                buffered_parts.append(rows.add_column(0, KG, kgs))
    buffered = _concat(buffered_parts)
    arrived = _concat([arrived_by_kg[kg] for kg in live if kg in arrived_by_kg])
    pairs = None
    if arrived is not None:
        if buffered is not None:
            buffered = buffered.select(arrived.column_names)
        pairs = new_pairs(spec, buffered, arrived)
        buffered = _concat([buffered, arrived]) if buffered is not None else arrived
    changes = _changes(
        spec, task.watermark_us, live, buffered, pairs, buffered_rows, set(arrived_by_kg)
    )
    report.bytes_written += store.write_groups(spec.operator, task.epoch, changes)
    report.groups_written += sum(1 for t in changes.values() if t is not None)
    if pairs is not None and pairs.num_rows:
        outputs.append(pairs.drop_columns([KG]))
    emitted = _concat([o for o in outputs if o.num_rows])
    if emitted is not None:
        report.rows_out = emitted.num_rows
    return emitted


def _arrivals(task, report, table: pa.Table | None) -> dict[int, pa.Table]:  # type: ignore[no-untyped-def]
    """This epoch's usable rows by key group; the report gets the input figures."""
    if table is None or table.num_rows == 0:
        return {}
    report.rows_in = table.num_rows
    report.max_event_sides = side_maxima(table)
    known = [t for t in report.max_event_sides if t is not None]
    report.max_event_us = max(known) if known else None
    by_kg = slices_by_group(usable_rows(task.spec, table, task.watermark_us))
    report.kg_rows = {kg: rows.num_rows for kg, rows in by_kg.items()}
    return by_kg


def _concat(tables: list[pa.Table]) -> pa.Table | None:
    return pa.concat_tables(tables, promote_options="default") if tables else None


def _changes(
    spec: JoinSpec,
    watermark_us: int | None,
    live: list[int],
    buffered: pa.Table | None,
    pairs: pa.Table | None,
    buffered_before: dict[int, int],
    arrived: set[int],
) -> dict[int, pa.Table | None]:
    """Each live key group's new state (None deletes it); groups where nothing arrived
    and nothing expired are left out, so their stored state stays as it is."""
    kept = slices_by_group(unexpired(spec, buffered, watermark_us)) if buffered is not None else {}
    emitted = slices_by_group(pairs) if pairs is not None else {}
    changes: dict[int, pa.Table | None] = {}
    for kg in live:
        rows, out = kept.get(kg), emitted.get(kg)
        if kg not in arrived and rows is not None and rows.num_rows == buffered_before.get(kg):
            continue
        if rows is None and out is None:
            if kg in buffered_before:
                changes[kg] = None
            continue
        changes[kg] = _group_table(rows, out)
    return changes


def _group_table(rows: pa.Table | None, pairs: pa.Table | None) -> pa.Table:
    """What a key group stores: its buffered rows and, flagged, this epoch's pairs."""
    parts = []
    if rows is not None:
        rows = rows.drop_columns([KG])
        parts.append(rows.append_column(EMITTED, pa.array(np.zeros(rows.num_rows, dtype=bool))))
    if pairs is not None:
        pairs = pairs.drop_columns([KG])
        pairs = pairs.append_column(EMITTED, pa.array(np.ones(pairs.num_rows, dtype=bool)))
        parts.append(pairs)
    return pa.concat_tables(parts, promote_options="default")
