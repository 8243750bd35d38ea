"""One VSN instance of a ``window_aggregate`` for one epoch, on the whole-group layout
(the embedded store): the instance reads each key group it owns that has input or state
as one table, merges its input in one vectorised step, and rewrites the groups that
changed, each with the rows it emitted (replayed groups re-emit them).

Cheaper than the keyed layout (``window_worker``) while the state is small, since a group is
one read and one write (the README has the figures); but its cost grows with the state, which
the keyed layout's does not.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.operators.columns import KG
from engine.runtime.operators.window_merge import (
    finalize,
    merge_partials,
    slices_by_group,
    split_closed,
    stored_rows,
    stored_table,
)
from engine.runtime.operators.window_spec import WindowSpec
from engine.runtime.operators.window_worker import input_partials
from engine.runtime.state import StateStore


def process_group_instance(
    task: Any, report: Any, table: pa.Table | None, store: StateStore
) -> pa.Table | None:
    """Merges the instance's input into its key groups; returns finalised emitted rows."""
    assert isinstance(task.spec, WindowSpec)
    op = task.spec.operator
    partials = input_partials(task, table, report)
    owned = {kg for kg, owner in enumerate(task.owners) if owner == report.instance}
    touched = set(report.kg_rows) | (store.groups(op) & owned)
    stored = store.load_groups(op, touched)
    states, previous, outputs = [], {}, []
    for kg in sorted(touched):
        group = stored.get(kg)
        if group is not None and group.epoch >= task.epoch:
            report.groups_replayed += 1  # already applied: re-emit what it emitted then
            outputs.append(stored_rows(group.table, emitted=True))
            continue
        previous[kg] = group is not None
        if group is not None:
            rows = stored_rows(group.table, emitted=False)
            states.append(rows.add_column(0, KG, pa.array([kg] * rows.num_rows, pa.int32())))
    if partials is not None and report.groups_replayed:
        partials = partials.filter(pc.is_in(partials[KG], pa.array(list(previous), pa.int32())))
    state = pa.concat_tables(states) if states else None
    merged = merge_partials(task.spec, state, partials)
    if merged is not None:
        outputs.append(_write_groups(task, report, store, merged, previous))
    else:
        store.write_groups(op, task.epoch, {kg: None for kg, had in previous.items() if had})
    outputs = [o for o in outputs if o.num_rows]
    if not outputs:
        return None
    emitted = finalize(
        task.spec, pa.concat_tables([o.select(outputs[0].column_names) for o in outputs])
    )
    report.rows_out = emitted.num_rows
    return emitted


def _write_groups(
    task: Any,
    report: Any,
    store: StateStore,
    merged: pa.Table,
    previous: dict[int, bool],
) -> pa.Table:
    """Writes every changed key group of the instance in one store call; returns the
    closed windows (emitted this epoch)."""
    closed, still_open = split_closed(merged, task.watermark_us)
    closed_by_kg, open_by_kg = slices_by_group(closed), slices_by_group(still_open)
    with_input = set(report.kg_rows)
    changes: dict[int, pa.Table | None] = {}
    for kg, existed in previous.items():
        closed_kg, open_kg = closed_by_kg.get(kg), open_by_kg.get(kg)
        if closed_kg is None and open_kg is None:
            if existed:
                changes[kg] = None
            continue
        if closed_kg is None and kg not in with_input:
            continue  # nothing changed: the stored state stays as it is
        changes[kg] = stored_table(_drop_kg(open_kg), _drop_kg(closed_kg))
    report.bytes_written += store.write_groups(task.spec.operator, task.epoch, changes)
    report.groups_written += sum(1 for table in changes.values() if table is not None)
    return _drop_kg(closed) if closed.num_rows else closed.drop_columns([KG])


def _drop_kg(table: pa.Table | None) -> pa.Table | None:
    return None if table is None else table.drop_columns([KG])
