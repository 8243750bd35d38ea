"""The vectorised dedupe selection against the row-by-row rule it replaces."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.runtime.operators.columns import TIME_US
from engine.runtime.operators.dedupe import FIRST, kept_rows, parse_dedupe_spec

SPEC = parse_dedupe_spec("d", {"key": ["k"], "time": "t", "within": "5 seconds"})
S = 1_000_000


def _row_by_row(
    rows: list[tuple[int, int, int]], seen: dict[int, int]
) -> list[tuple[int, int, int]]:
    kept, last = [], dict(seen)
    for k, t, i in sorted(rows):
        if k not in last or t >= last[k] + SPEC.within_us:
            kept.append((k, t, i))
            last[k] = t
    return kept


events = st.lists(
    st.tuples(st.integers(0, 5), st.integers(-3, 30).map(lambda s: s * S // 2)), max_size=60
)
remembered = st.dictionaries(st.integers(0, 5), st.integers(-20, 20).map(lambda s: s * S // 2))


@settings(max_examples=300, deadline=None)
@given(events, remembered)
def test_kept_rows_match_the_row_by_row_rule(found: list, seen: dict) -> None:
    rows = [(k, t, i) for i, (k, t) in enumerate(found)]
    table = pa.table(
        {
            "k": pa.array([r[0] for r in rows], pa.int64()),
            TIME_US: pa.array([r[1] for r in rows], pa.int64()),
            "i": pa.array([r[2] for r in rows], pa.int64()),
        }
    )
    seen_table = pa.table(
        {"k": pa.array(list(seen), pa.int64()), FIRST: pa.array(list(seen.values()), pa.int64())}
    )
    kept = kept_rows(SPEC, table, seen_table if seen else None)
    got = list(zip(*(kept[c].to_pylist() for c in ("k", TIME_US, "i")), strict=True))
    assert got == _row_by_row(rows, seen)


def test_many_rows_are_selected_without_a_loop_per_row() -> None:
    rng = np.random.default_rng(0)
    table = pa.table(
        {"k": rng.integers(0, 50_000, 300_000), TIME_US: rng.integers(0, 60 * S, 300_000)}
    )
    kept = kept_rows(SPEC, table, None)
    assert 50_000 <= kept.num_rows < 300_000
