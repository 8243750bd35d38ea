"""One VSN instance of a ``dedupe`` operator for one epoch (runs in a Python worker).

An entry is one remembered key: its value the time of the key's latest kept row, its timer
the moment the watermark expires it (that time plus ``within``). The instance reads the
entries of its input's keys only, puts back the keys it kept a row of, and each key group
that had input commits atomically with its mark, the rows it let through and the expiry of
the keys the watermark passed. A key group without input is neither read nor written: its
expired keys go with its next input's commit (or a merge), and an expired key never holds
back a row anyway (a row at or after the watermark is ``within`` past it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.operators.columns import KG, TIME_US
from engine.runtime.operators.dedupe import FIRST, DedupeSpec, kept_rows
from engine.runtime.operators.entries import decode, encode
from engine.runtime.operators.replay import emitted_rows, replay_of
from engine.runtime.operators.window_merge import slices_by_group
from engine.runtime.state import KeyedChanges, StateStore
from engine.runtime.state.base import FIELD, TIMER, VALUE
from engine.runtime.state.base import KG as ENTRY_KG


def process_dedupe_instance(
    task: Any, report: Any, table: pa.Table | None, store: StateStore
) -> pa.Table | None:
    """Lets through the first row per key within the bound; returns the emitted rows.

    ``task`` is a ``vsn_worker.EpochTask`` whose spec is a DedupeSpec.
    """
    spec: DedupeSpec = task.spec
    columns = [f.name for f in task.output_schema if not f.name.startswith("__")]
    replay = replay_of(task, report, store)
    rows = replay.pending(_input(task, report, table))
    outputs = [t.select(columns) for t in replay.emitted]
    if rows is not None and rows.num_rows:
        fields = encode(rows, list(spec.keys))
        kept = kept_rows(spec, rows, _seen(store, spec, rows, fields))
        changes = _changes(spec, task.watermark_us, rows, kept, columns)
        report.bytes_written += store.commit_entries(spec.operator, task.epoch, changes)
        outputs.append(kept.select(columns))
    return emitted_rows(outputs, report)


def _input(task: Any, report: Any, table: pa.Table | None) -> pa.Table | None:
    """The epoch's rows that are not late; the report gets the input figures."""
    if table is None or table.num_rows == 0:
        return None
    report.rows_in = table.num_rows
    report.max_event_us = pc.max(table[TIME_US]).as_py()
    if task.watermark_us is not None:  # rows older than the watermark are late
        table = table.filter(pc.greater_equal(table[TIME_US], task.watermark_us))
    report.kg_rows = {kg: t.num_rows for kg, t in slices_by_group(table).items()}
    return table


def _seen(store: StateStore, spec: DedupeSpec, rows: pa.Table, fields: pa.Array) -> pa.Table:
    """The remembered keys among the input's (key columns and ``FIRST``), read by key."""
    wanted = pa.table({ENTRY_KG: rows[KG], FIELD: fields}).group_by(
        [ENTRY_KG, FIELD], use_threads=False).aggregate([])
    found = store.read_entries(spec.operator, wanted)
    keys = decode(found[FIELD], pa.schema([rows.schema.field(k) for k in spec.keys]))
    return keys.append_column(FIRST, pc.cast(found[VALUE], pa.int64()))


def _changes(
    spec: DedupeSpec, watermark_us: int | None, rows: pa.Table, kept: pa.Table, columns: list[str]
) -> dict[int, KeyedChanges]:
    """Per key group that had input: the keys it kept a row of, remembered at their latest
    kept row's time, the keys the watermark expired dropped, and the rows it let through."""
    latest = kept.group_by([KG, *spec.keys], use_threads=False).aggregate([(TIME_US, "max")])
    times = latest[f"{TIME_US}_max"]
    puts = pa.table({KG: latest[KG], TIMER: pc.add(times, spec.within_us).cast(pa.int64()),
                     FIELD: encode(latest, list(spec.keys)),
                     VALUE: pc.cast(times, pa.string())})
    by_group, emitted = slices_by_group(puts), slices_by_group(kept)
    return {
        kg: KeyedChanges(
            puts=by_group[kg].drop_columns([KG]) if kg in by_group else None,
            expire=watermark_us,
            emitted=emitted[kg].select(columns) if kg in emitted else kept.select(columns)
            .slice(0, 0),
        )
        for kg in np.unique(rows[KG].to_numpy()).tolist()
    }
