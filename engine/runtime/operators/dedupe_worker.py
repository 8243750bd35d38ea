"""One VSN instance of a ``dedupe`` operator for one epoch (runs in a Python worker)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.operators.columns import KG, TIME_US
from engine.runtime.operators.dedupe import (
    DedupeSpec,
    group_table,
    kept_rows,
    remembered,
    split_group,
)
from engine.runtime.operators.window_merge import slices_by_group
from engine.runtime.state import StateStore
from engine.runtime.state.base import GroupState


def process_dedupe_instance(
    task,
    report,
    table: pa.Table | None,  # type: ignore[no-untyped-def]
    store: StateStore,
) -> pa.Table | None:
    """Lets through the first row per key within the bound; returns the emitted rows.

    ``task`` is a ``vsn_worker.EpochTask`` whose spec is a DedupeSpec.
    """
    spec: DedupeSpec = task.spec
    columns = [f.name for f in task.output_schema if not f.name.startswith("__")]
    by_group = {}
    if table is not None and table.num_rows:
        report.rows_in = table.num_rows
        report.max_event_us = pc.max(table[TIME_US]).as_py()
        if task.watermark_us is not None:  # rows older than the watermark are late
            table = table.filter(pc.greater_equal(table[TIME_US], task.watermark_us))
        by_group = slices_by_group(table)
        report.kg_rows = {kg: rows.num_rows for kg, rows in by_group.items()}
    owned = {kg for kg, owner in enumerate(task.owners) if owner == report.instance}
    touched = sorted(set(by_group) | (store.groups(spec.operator) & owned))
    stored = store.load_groups(spec.operator, touched)
    outputs: list[pa.Table] = []
    changes: dict[int, pa.Table | None] = {}
    for kg in touched:
        emitted = _update_group(
            task, spec, report, stored.get(kg), changes, kg, by_group.get(kg), columns
        )
        if emitted is not None and emitted.num_rows:
            outputs.append(emitted)
    report.bytes_written += store.write_groups(spec.operator, task.epoch, changes)
    report.groups_written += sum(1 for table in changes.values() if table is not None)
    if not outputs:
        return None
    result = pa.concat_tables(outputs)
    report.rows_out = result.num_rows
    return result


def _update_group(
    task,
    spec: DedupeSpec,
    report,  # type: ignore[no-untyped-def]
    group: GroupState | None,
    changes: dict[int, pa.Table | None],
    kg: int,
    rows: pa.Table | None,
    columns: list[str],
) -> pa.Table | None:
    """The group's emitted rows; its new state (or None to delete it) goes in ``changes``."""
    if group is not None and group.epoch >= task.epoch:
        report.groups_replayed += 1
        return split_group(spec, group.table, columns)[1]
    seen = split_group(spec, group.table, columns)[0] if group is not None else None
    kept = kept_rows(spec, rows.drop_columns([KG]), seen) if rows is not None else None
    now_seen = remembered(spec, seen, kept, task.watermark_us)
    if (
        rows is None
        and seen is not None
        and now_seen is not None
        and (now_seen.num_rows == seen.num_rows)
    ):
        return None  # nothing arrived and nothing expired: the stored group stays
    output = kept.select(columns) if kept is not None else None
    if now_seen is None and (output is None or output.num_rows == 0):
        if group is not None:
            changes[kg] = None
        return None
    if output is None:
        output = pa.Table.from_batches([], schema=_schema(task, columns))
    changes[kg] = group_table(now_seen, output)
    return output


def _schema(task, columns: list[str]) -> pa.Schema:  # type: ignore[no-untyped-def]
    return pa.schema([f for f in task.output_schema if f.name in columns])
