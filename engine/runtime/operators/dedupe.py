"""``dedupe`` through the VSN stage: a row is dropped when a row with the same key was
kept less than ``within`` earlier in event time; remembered keys expire once the
watermark passes their time + ``within``.

The state is each remembered key's latest kept time (``dedupe_worker``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from engine.runtime.operators.columns import TIME_US
from engine.runtime.operators.durations import parse_duration_us
from engine.runtime.operators.key_params import KeyedSpec, keyed_params

FIRST = "__first_us"


@dataclass(frozen=True)
class DedupeSpec(KeyedSpec):
    """Parsed params of a ``dedupe`` operator."""

    within_us: int


def parse_dedupe_spec(operator: str, params: Mapping[str, Any]) -> DedupeSpec:
    """Reads ``dedupe`` params; errors name the operator."""
    keyed = keyed_params(operator, params)
    within_us = parse_duration_us(params.get("within", ""), f"operator {operator!r} within")
    return DedupeSpec(**keyed, within_us=within_us)


def change_refused(old: DedupeSpec, new: DedupeSpec) -> str | None:
    """None if ``new`` can continue from ``old``'s remembered keys, else the reason."""
    if (old.keys, old.time) != (new.keys, new.time):
        return "changing the key or time column would orphan the remembered keys"
    return None


def kept_rows(spec: DedupeSpec, rows: pa.Table, seen: pa.Table | None) -> pa.Table:
    """The rows of one epoch that survive, given the remembered keys ``seen``
    (key columns + ``__first_us``). Ties in event time break on the row's position in
    (key, time, all columns) order, which does not depend on how rows were split."""
    rows = rows.sort_by(
        [(k, "ascending") for k in spec.keys]
        + [(TIME_US, "ascending")]
        + [
            (c, "ascending")
            for c in rows.column_names
            if c not in spec.keys and c != TIME_US and _sortable(rows, c)
        ]
    )
    last = _last_seen(spec, rows, seen)
    codes = _key_codes(rows, spec.keys)
    keep = _first_within(codes, rows[TIME_US].to_numpy(), last, spec.within_us)
    return rows.filter(pa.array(keep))


def _first_within(
    codes: np.ndarray, times: np.ndarray, last: np.ndarray, within_us: int
) -> np.ndarray:
    """Which rows are kept: in each run of equal codes (times ascending), the first row at
    least ``within_us`` after the run's last kept time (``last``, NaN-free: ``_NONE`` when
    none), then the first one ``within_us`` after that, and so on. Each round finds the
    next kept row of every run at once with one ``searchsorted`` over (run, time) packed
    into one sorted int64, so rounds are as many as a key keeps rows in one epoch."""
    keep = np.zeros(len(codes), dtype=bool)
    if len(codes) == 0:
        return keep
    starts = np.flatnonzero(np.diff(codes, prepend=codes[0] - 1))
    ends = np.append(starts[1:], len(codes))
    # Times as dense ranks keep the packed values small whatever the times' span.
    distinct = np.unique(times)
    span = len(distinct) + 1
    packed = np.arange(len(starts)).repeat(ends - starts) * span + np.searchsorted(distinct, times)
    run, after = np.arange(len(starts)), starts
    previous = last[starts]
    threshold = np.where(previous == _NONE, distinct[0], previous + within_us)
    while len(run):
        rank = np.searchsorted(distinct, threshold, side="left")
        found = np.maximum(np.searchsorted(packed, run * span + rank, side="left"), after)
        alive = found < ends[run]
        run, found = run[alive], found[alive]
        keep[found] = True
        threshold, after = times[found] + within_us, found + 1
    return keep


_NONE = np.iinfo(np.int64).min  # no remembered time for the key


def _last_seen(spec: DedupeSpec, rows: pa.Table, seen: pa.Table | None) -> np.ndarray:
    if seen is None or seen.num_rows == 0:
        return np.full(rows.num_rows, _NONE, dtype=np.int64)
    joined = (
        rows.select(list(spec.keys))
        .append_column("__row", pa.array(np.arange(rows.num_rows)))
        .join(seen, list(spec.keys), join_type="left outer")
        .sort_by("__row")
    )
    return joined[FIRST].fill_null(_NONE).to_numpy()


def _key_codes(rows: pa.Table, keys: tuple[str, ...]) -> np.ndarray:
    # Rows are sorted by key, so a new code starts wherever any key column changes.
    change = np.zeros(rows.num_rows, dtype=bool)
    change[:1] = True
    for key in keys:
        values = rows[key].to_numpy(zero_copy_only=False)
        change[1:] |= values[1:] != values[:-1]
    return np.cumsum(change)


def _sortable(rows: pa.Table, column: str) -> bool:
    kind = rows.schema.field(column).type
    return not (pa.types.is_nested(kind) or pa.types.is_binary(kind))
