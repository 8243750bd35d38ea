"""What a replayed epoch finds done: an instance's key groups whose mark is at or past the
epoch committed in its first attempt, with the rows they emitted then. Those rows are sent
again as committed and the groups' input is not processed twice; the other owned groups run
as in a first attempt. Every keyed kernel (window, dedupe, join) begins with this."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.operators.columns import KG
from engine.runtime.state import StateStore


@dataclass(frozen=True)
class Replay:
    """The instance's ``owned`` key groups, those ``done`` in this epoch's first attempt,
    and the tables they ``emitted`` then."""

    owned: list[int]
    done: list[int]
    emitted: list[pa.Table]

    def pending(self, rows: pa.Table | None) -> pa.Table | None:
        """``rows`` without those of the groups already done."""
        if rows is None or not self.done:
            return rows
        return rows.filter(pc.invert(pc.is_in(rows[KG], pa.array(self.done, pa.int32()))))


def emitted_rows(outputs: list[pa.Table], report: Any) -> pa.Table | None:
    """The instance's rows out: the groups done replayed and the new ones, as one table
    the report counts (None when there are none)."""
    outputs = [o for o in outputs if o.num_rows]
    if not outputs:
        return None
    result = pa.concat_tables(outputs, promote_options="default")
    report.rows_out = result.num_rows
    return result


def replay_of(task: Any, report: Any, store: StateStore) -> Replay:
    """What of ``task``'s epoch (a ``vsn_worker.EpochTask``) the instance of ``report``
    committed already."""
    op = task.spec.operator
    owned = [kg for kg, owner in enumerate(task.owners) if owner == report.instance]
    marks = store.marks(op, owned)
    done = sorted(kg for kg in owned if marks.get(kg, -1) >= task.epoch)
    emitted = list(store.read_emitted(op, done).values()) if done else []
    return Replay(owned, done, emitted)
