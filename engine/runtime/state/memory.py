"""In-process state store for unit tests: the sorted-runs layout with its rows and runs in
dicts (not shared between processes)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import pyarrow as pa

from engine.runtime.state.base import StateSize
from engine.runtime.state.runs_store import GroupRow, Plan, RunsStore
from engine.runtime.state.sorted_runs import Loaded, Run, as_loaded

_NAMES = itertools.count()


class MemoryStateStore(RunsStore):
    """Group rows and run tables kept in dicts; same semantics as the real stores."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, int], GroupRow] = {}
        self._emitted: dict[tuple[str, int], pa.Table | None] = {}
        self._tables: dict[tuple[str, int], pa.Table] = {}

    def _rows(self, operator: str, key_groups: Iterable[int]) -> dict[int, GroupRow]:
        found = ((kg, self._groups.get((operator, kg))) for kg in set(key_groups))
        return {kg: row for kg, row in found if row is not None}

    def _loaded(self, operator: str, run: Run) -> Loaded:
        return as_loaded(run, self._tables[(str(run.file), run.batch)])

    def read_emitted(self, operator: str, key_groups: Iterable[int]) -> dict[int, pa.Table]:
        """The rows each group's last commit emitted."""
        found = ((kg, self._emitted.get((operator, kg))) for kg in set(key_groups))
        return {kg: rows for kg, rows in found if rows is not None}

    def _commit(self, operator: str, epoch: int, plan: Plan) -> int:
        name = f"e{epoch}-{next(_NAMES)}"
        for batch, table in enumerate(plan.tables):
            self._tables[(name, batch)] = table.combine_chunks()
        for kg, change in plan.live.items():
            listed = tuple(plan.listed(kg, name))
            before = plan.before.get(kg)
            for dropped in set(before.runs if before else ()) - set(listed):
                self._tables.pop((str(dropped.file), dropped.batch), None)
            self._groups[(operator, kg)] = GroupRow(epoch, listed, "")
            self._emitted[(operator, kg)] = change.emitted
        return sum(table.nbytes for table in plan.tables)

    def groups(self, operator: str) -> set[int]:
        """Key groups of the operator that hold entries."""
        return {kg for (op, kg), row in self._groups.items() if op == operator and row.runs}

    def size(self) -> StateSize:
        """The tables' bytes, the runs' rows and the groups with runs."""
        rows = [row for row in self._groups.values() if row.runs]
        return StateSize(sum(t.nbytes for t in self._tables.values()),
                         sum(run.rows for row in rows for run in row.runs), len(rows))

    def clear(self) -> None:
        """Drops everything."""
        self._groups.clear()
        self._emitted.clear()
        self._tables.clear()
