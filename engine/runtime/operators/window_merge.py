"""Vectorised window-state merging for one VSN instance and one epoch (pure pyarrow).

Rows become partial aggregates per (key group, key, window) in one Arrow ``group_by``
(the key group is part of the grouping key), split back per key group for the atomic
per-group commits. Everything is deterministic in (stored state, input, epoch, watermark), which is
what lets a replayed epoch reproduce the first attempt exactly.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.operators.columns import KG, TIME_US
from engine.runtime.operators.window_spec import (
    MAX_EVENT,
    ROWS,
    WINDOW_END,
    WINDOW_START,
    WindowSpec,
)


def assign_windows(spec: WindowSpec, rows: pa.Table) -> pa.Table:
    """Each row once per window it falls in, with the window's start (micros), as Spark's
    ``window`` assigns them: the latest start is ``t - floormod(t, slide)``, earlier ones
    step back by the slide while the window still holds ``t``. Rows without an event time
    fall in no window."""
    if rows[TIME_US].null_count:
        rows = rows.filter(pc.is_valid(rows[TIME_US]))
    times = rows[TIME_US].to_numpy()
    latest = times - np.mod(times, spec.slide_us)
    overlapping = -(-spec.window_us // spec.slide_us)
    if overlapping == 1:
        return rows.append_column(WINDOW_START, pa.array(latest, pa.int64()))
    parts = []
    for i in range(overlapping):
        starts = latest - i * spec.slide_us
        holds = times < starts + spec.window_us
        if i == 0 or holds.all():
            parts.append(rows.append_column(WINDOW_START, pa.array(starts, pa.int64())))
        elif holds.any():
            chosen = pa.array(starts[holds], pa.int64())
            parts.append(rows.filter(pa.array(holds)).append_column(WINDOW_START, chosen))
    return pa.concat_tables(parts)


def partials_from_rows(spec: WindowSpec, rows: pa.Table) -> pa.Table:
    """Partials of raw rows (kg, keys, inputs, event time in micros): one row per key group,
    key and window, with the row count and max event time of each; window bounds are
    assigned here, so they need not travel with every row."""
    rows = assign_windows(spec, rows)
    aggregations: list[tuple[object, str]] = [
        ([], "count_all") if p.column is None else (p.column, p.func) for p in spec.partials]
    aggregations += [([], "count_all"), (TIME_US, "max")]
    names = [*(p.name for p in spec.partials), ROWS, MAX_EVENT]
    keys = [KG, *spec.keys, WINDOW_START]
    grouped = rows.group_by(keys, use_threads=False).aggregate(aggregations)
    # group_by answers the keys first, then one column per aggregation.
    grouped = grouped.rename_columns([*keys, *names])
    end = pc.add(grouped[WINDOW_START], pa.scalar(spec.window_us, pa.int64()))
    return grouped.add_column(len(keys), WINDOW_END, end)


def drop_late(partials: pa.Table, watermark_us: int | None) -> pa.Table:
    """Rows of windows the watermark already closed (and emitted) are dropped."""
    if watermark_us is None:
        return partials
    return partials.filter(pc.greater(partials[WINDOW_END], watermark_us))


def slices_by_group(table: pa.Table) -> dict[int, pa.Table]:
    """The table cut into one slice per key group (sorted once, sliced without copies)."""
    if table.num_rows == 0:
        return {}
    values = table[KG].to_numpy()
    order = np.argsort(values, kind="stable")
    ordered = table.take(pa.array(order))
    groups, starts = np.unique(values[order], return_index=True)
    ends = [*starts[1:].tolist(), len(values)]
    return {
        int(g): ordered.slice(s, e - s)
        for g, s, e in zip(groups.tolist(), starts.tolist(), ends, strict=True)
    }


def finalize(spec: WindowSpec, partials: pa.Table) -> pa.Table:
    """Output rows of closed windows: keys, window bounds and each aggregate's value."""
    columns = {name: partials[name] for name in spec.group_columns}
    for agg in spec.aggregates:
        if agg.func == "avg":
            total = pc.cast(partials[agg.partials[0]], pa.float64())
            count = pc.cast(partials[agg.partials[1]], pa.float64())
            empty = pc.equal(count, 0.0)
            columns[agg.name] = pc.if_else(
                empty, pa.scalar(None, pa.float64()), pc.divide(total, count)
            )
        else:
            columns[agg.name] = partials[agg.partials[0]]
    return pa.table(columns)
