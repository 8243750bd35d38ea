"""The code one VSN instance runs inside a Spark Python worker for one epoch.

Spark routes every row of key group kg to partition ``owners[kg]`` (repartitionById), so
a task is exactly one instance and owns its key groups for this epoch. It merges them
into the shared store in one vectorised step (``window_worker``, ``dedupe_worker``,
``join_worker``), emits what the operator emits and appends one report row.
"""

from __future__ import annotations

import functools
import gc
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from engine.runtime.operators.dedupe import DedupeSpec
from engine.runtime.operators.join import JoinSpec
from engine.runtime.operators.window_spec import WindowSpec
from engine.runtime.operators.window_worker import process_window_instance
from engine.runtime.state import StoreSpec, open_store

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
    state_schema: pa.Schema | None = None  # a window's entries: keys and partials


@dataclass
class InstanceReport:
    """What one instance did in one epoch; sent back to the driver as JSON."""

    instance: int
    rows_in: int = 0
    rows_out: int = 0
    busy_ms: float = 0.0
    max_event_us: int | None = None
    max_event_sides: list[int | None] | None = None  # a join's (left, right) latest times
    bytes_written: int = 0
    bytes_read: int = 0
    kg_rows: dict[int, int] = field(default_factory=dict)


@functools.cache
def _settle_worker() -> None:
    """Once per Python worker: freeze what is alive now (pyspark, pyarrow, numpy and this
    package). Spark runs a full ``gc.collect()`` in the worker after every task, which an
    epoch pays per instance beyond the first on each core; with the modules frozen out of
    it, that costs next to nothing."""
    gc.freeze()


def run_instance(task: EpochTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: merge this instance's key groups, yield emitted rows and a report."""
    from pyspark import TaskContext

    _settle_worker()

    received = list(batches)
    started = time.perf_counter()
    context = TaskContext.get()
    report = InstanceReport(instance=context.partitionId() if context is not None else 0)
    table = pa.Table.from_batches(received) if received else None
    store = open_store(task.store)
    read_before = store.bytes_read
    if isinstance(task.spec, WindowSpec):
        emitted = process_window_instance(task, report, table, store)
    elif isinstance(task.spec, JoinSpec):
        from engine.runtime.operators.join_worker import process_join_instance

        emitted = process_join_instance(task, report, table, store)
    else:
        from engine.runtime.operators.dedupe_worker import process_dedupe_instance

        emitted = process_dedupe_instance(task, report, table, store)
    report.bytes_read = store.bytes_read - read_before  # what this instance read
    report.busy_ms = (time.perf_counter() - started) * 1000.0
    if emitted is not None and emitted.num_rows:
        yield from _to_output(task, emitted).to_batches()
    yield _report_batch(task, report)


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

