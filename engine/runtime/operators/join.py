"""``join`` through the VSN stage: a windowed stream-stream inner join of two inputs.

A left row and a right row match when their keys are equal and their event times are at
most ``within`` apart; each matching pair is emitted once, in the epoch where the later of
the two arrives. Both inputs travel to the instances as one routed input, tagged by side
(``__side``: 0 left, 1 right). A key group buffers the rows of both sides that a future
row could still match, and drops a row once the watermark passes its time + ``within``
(rows older than the watermark are late and dropped, as the other keyed operators do).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.errors import UnsupportedJobError
from engine.runtime.operators.columns import KG, TIME_US
from engine.runtime.operators.durations import parse_duration_us
from engine.runtime.operators.key_params import KeyedSpec, keyed_params

SIDE = "__side"
LEFT, RIGHT = 0, 1
_LEFT_ROW, _RIGHT_ROW, _RIGHT_TIME = "__left_row", "__right_row", "__right_time_us"


@dataclass(frozen=True)
class JoinSpec(KeyedSpec):
    """Parsed params of a ``join``; the column layout is filled in per epoch from the
    inputs' schemas (``with_layout``)."""

    within_us: int
    left_columns: tuple[str, ...] = ()
    right_columns: tuple[str, ...] = ()

    @property
    def output_columns(self) -> list[str]:
        """The pair's columns: all left columns, then the right-only ones."""
        return [*self.left_columns, *self.right_columns]

    def with_layout(self, left: list[str], right: list[str]) -> JoinSpec:
        """The spec with the output layout of inputs with columns ``left`` and ``right``."""
        extra = tuple(c for c in right if c not in left)
        return replace(self, left_columns=tuple(left), right_columns=extra)


def parse_join_spec(operator: str, params: Mapping[str, Any]) -> JoinSpec:
    """Reads ``join`` params; errors name the operator and the param."""
    where = f"operator {operator!r}"
    keyed = keyed_params(operator, params)
    if "within" not in params:
        raise UnsupportedJobError(f"{where}: 'within' is required (e.g. \"5 seconds\")")
    return JoinSpec(**keyed, within_us=parse_duration_us(params["within"], f"{where} within"))


def change_refused(old: JoinSpec, new: JoinSpec) -> str | None:
    """None if ``new`` can continue from ``old``'s buffers, else the reason it cannot."""
    if (old.keys, old.time) != (new.keys, new.time):
        return "changing the key or time column would orphan the buffered rows"
    if new.within_us > old.within_us:
        return (
            "widening 'within' would miss matches with rows the narrower bound already "
            "dropped from the buffers"
        )
    return None


def usable_rows(spec: JoinSpec, rows: pa.Table, watermark_us: int | None) -> pa.Table:
    """Rows that can match: a key and an event time, not older than the watermark."""
    keep = pc.is_valid(rows[TIME_US])
    for key in spec.keys:
        keep = pc.and_(keep, pc.is_valid(rows[key]))
    if watermark_us is not None:
        keep = pc.and_(keep, pc.greater_equal(rows[TIME_US], watermark_us))
    return rows.filter(keep)


def side(rows: pa.Table, which: int) -> pa.Table:
    """The rows of one side."""
    return rows.filter(pc.equal(rows[SIDE], which))


def matches(spec: JoinSpec, left: pa.Table, right: pa.Table) -> pa.Table:
    """Every (left, right) pair with equal keys and event times at most ``within`` apart:
    ``__kg`` (from the left row), the left columns, then the right-only columns.

    The hash join sees only keys, times and row numbers; the payload is gathered with
    ``take``, so any column type can be carried."""
    if left.num_rows == 0 or right.num_rows == 0:
        return _empty_pairs(spec, left, right)
    lhs = left.select([*spec.keys, TIME_US]).append_column(
        _LEFT_ROW, pa.array(np.arange(left.num_rows, dtype=np.int64))
    )
    rhs = (
        right.select([*spec.keys, TIME_US])
        .rename_columns([*spec.keys, _RIGHT_TIME])
        .append_column(_RIGHT_ROW, pa.array(np.arange(right.num_rows, dtype=np.int64)))
    )
    joined = lhs.join(rhs, list(spec.keys), join_type="inner", use_threads=False)
    apart = pc.abs(pc.subtract(joined[TIME_US], joined[_RIGHT_TIME]))
    joined = joined.filter(pc.less_equal(apart, spec.within_us))
    left_part = left.select([KG, *spec.left_columns]).take(joined[_LEFT_ROW])
    right_part = right.select(list(spec.right_columns)).take(joined[_RIGHT_ROW])
    return pa.Table.from_arrays([*left_part.columns, *right_part.columns],
                                names=[KG, *spec.output_columns])


def _empty_pairs(spec: JoinSpec, left: pa.Table, right: pa.Table) -> pa.Table:
    fields = [left.schema.field(c) for c in [KG, *spec.left_columns]]
    fields += [right.schema.field(c) for c in spec.right_columns]
    return pa.Table.from_batches([], schema=pa.schema(fields))


def unexpired(spec: JoinSpec, rows: pa.Table, watermark_us: int | None) -> pa.Table:
    """Buffered rows a future row can still match: a future row is at least the watermark
    (older ones are late), so a row older than watermark - ``within`` is done."""
    if watermark_us is None:
        return rows
    return rows.filter(pc.greater_equal(rows[TIME_US], watermark_us - spec.within_us))


def side_maxima(rows: pa.Table) -> list[int | None]:
    """The latest event time of each side (None for a side without rows)."""
    return [pc.max(side(rows, which)[TIME_US]).as_py() for which in (LEFT, RIGHT)]


def new_pairs(spec: JoinSpec, buffered: pa.Table | None, arrived: pa.Table) -> pa.Table:
    """The pairs with at least one row that ``arrived`` this epoch: new left rows with
    every right row (buffered or new), and buffered left rows with new right rows. Pairs of
    two buffered rows were emitted in an earlier epoch. Both tables have the same columns."""
    new_left, new_right = side(arrived, LEFT), side(arrived, RIGHT)
    if buffered is None or buffered.num_rows == 0:
        return matches(spec, new_left, new_right)
    every_right = pa.concat_tables([side(buffered, RIGHT), new_right], promote_options="default")
    return pa.concat_tables(
        [
            matches(spec, new_left, every_right),
            matches(spec, side(buffered, LEFT), new_right),
        ],
        promote_options="default",
    )
