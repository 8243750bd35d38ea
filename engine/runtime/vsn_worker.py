"""The code one VSN instance runs inside a Spark Python worker for one epoch.

Spark routes every row of key group kg to partition ``owners[kg]`` (repartitionById), so
a task is exactly one instance and owns its key groups for this epoch. It merges them
into the shared store in one vectorised step, emits closed windows and appends one
report row.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.dedupe import DedupeSpec
from engine.runtime.join import JoinSpec
from engine.runtime.state import StateStore, StoreSpec, open_store
from engine.runtime.window_merge import (
    KG,
    drop_late,
    finalize,
    merge_partials,
    partials_from_rows,
    slices_by_group,
    split_closed,
    stored_rows,
    stored_table,
)
from engine.runtime.window_spec import MAX_EVENT, ROWS, WindowSpec

REPORT = "__report"


@dataclass(frozen=True)
class EpochTask:
    """Everything an instance needs for one epoch; pickled into the Spark closure."""

    spec: WindowSpec | DedupeSpec | JoinSpec
    store: StoreSpec
    epoch: int
    watermark_us: int | None
    owners: tuple[int, ...]
    output_schema: pa.Schema


@dataclass
class InstanceReport:
    """What one instance did in one epoch; sent back to the driver as JSON."""

    instance: int
    rows_in: int = 0
    partials_in: int = 0
    rows_out: int = 0
    busy_ms: float = 0.0
    max_event_us: int | None = None
    max_event_sides: list[int | None] | None = None  # a join's (left, right) latest times
    groups_written: int = 0
    groups_replayed: int = 0
    bytes_written: int = 0
    kg_rows: dict[int, int] = field(default_factory=dict)


_settled = False


def _settle_worker() -> None:
    """Once per Python worker: freeze what is alive now (pyspark, pyarrow, numpy and this
    package). Spark runs a full ``gc.collect()`` in the worker after every task; with the
    modules frozen out of it that costs well under 1 ms instead of ~50 ms, which an epoch pays
    per instance beyond the first on each core."""
    global _settled
    if not _settled:
        gc.freeze()
        _settled = True


def run_instance(task: EpochTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: merge this instance's key groups, yield emitted rows and a report."""
    from pyspark import TaskContext

    _settle_worker()

    received = list(batches)
    started = time.perf_counter()
    context = TaskContext.get()
    report = InstanceReport(instance=context.partitionId() if context is not None else 0)
    table = pa.Table.from_batches(received) if received else None
    if isinstance(task.spec, WindowSpec):
        emitted = process_instance(task, report, table, open_store(task.store))
    elif isinstance(task.spec, JoinSpec):
        from engine.runtime.join_worker import process_join_instance

        emitted = process_join_instance(task, report, table, open_store(task.store))
    else:
        from engine.runtime.dedupe_worker import process_dedupe_instance

        emitted = process_dedupe_instance(task, report, table, open_store(task.store))
    report.busy_ms = (time.perf_counter() - started) * 1000.0
    if emitted is not None and emitted.num_rows:
        yield from _to_output(task, emitted).to_batches()
    yield _report_batch(task, report)


def process_instance(
    task: EpochTask, report: InstanceReport, table: pa.Table | None, store: StateStore
) -> pa.Table | None:
    """Merges the instance's input into its key groups; returns finalised emitted rows."""
    assert isinstance(task.spec, WindowSpec)
    op = task.spec.operator
    partials = _partials(task, table, report)
    owned = {kg for kg, owner in enumerate(task.owners) if owner == report.instance}
    touched = set(report.kg_rows) | (store.groups(op) & owned)
    stored = store.read_groups(op, touched)
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


def _partials(task: EpochTask, table: pa.Table | None, report: InstanceReport) -> pa.Table | None:
    if table is None or table.num_rows == 0:
        return None
    assert isinstance(task.spec, WindowSpec)
    partials = partials_from_rows(task.spec, table)
    report.rows_in = table.num_rows  # rows, not rows times the sliding windows they fall in
    report.max_event_us = pc.max(partials[MAX_EVENT]).as_py()
    partials = drop_late(partials, task.watermark_us)
    report.partials_in = partials.num_rows
    counts = partials.group_by(KG, use_threads=False).aggregate([(ROWS, "sum")])
    report.kg_rows = dict(
        zip(counts[KG].to_pylist(), counts[f"{ROWS}_sum"].to_pylist(), strict=True)
    )
    return partials


def _write_groups(
    task: EpochTask,
    report: InstanceReport,
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


def _to_output(task: EpochTask, emitted: pa.Table) -> pa.Table:
    columns = [
        pa.nulls(emitted.num_rows, pa.string())
        if f.name == REPORT
        else emitted[f.name].cast(f.type)
        for f in task.output_schema
    ]
    return pa.Table.from_arrays(columns, schema=task.output_schema)


def _report_batch(task: EpochTask, report: InstanceReport) -> pa.RecordBatch:
    payload = json.dumps(report.__dict__)
    arrays = [
        pa.array([payload], pa.string()) if f.name == REPORT else pa.nulls(1, f.type)
        for f in task.output_schema
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=task.output_schema)
