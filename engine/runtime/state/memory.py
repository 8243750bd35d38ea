"""In-process state store for unit tests: the sorted-runs layout with its rows and runs in
dicts (not shared between processes)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import replace

import pyarrow as pa

from engine.runtime.state.base import Combine, KeyedChanges
from engine.runtime.state.runs_store import NEW, GroupRow, RunsStore
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

    def _open(self, operator: str, rows: Mapping[int, GroupRow]) -> dict[int, list[Loaded | Run]]:
        return {
            kg: [as_loaded(run, self._tables[(run.file, run.batch)]) if run.file else run
                 for run in row.runs]
            for kg, row in rows.items()
        }

    def read_emitted(self, operator: str, key_groups: Iterable[int]) -> dict[int, pa.Table]:
        """The rows each group's last commit emitted."""
        found = ((kg, self._emitted.get((operator, kg))) for kg in set(key_groups))
        return {kg: rows for kg, rows in found if rows is not None}

    def commit_entries(
        self,
        operator: str,
        epoch: int,
        changes: Mapping[int, KeyedChanges],
        combine: Combine | None = None,
    ) -> int:
        """Applies the plan (``RunsStore._planned``) group by group."""
        before, live, runs, tables = self._planned(operator, epoch, changes, combine)
        name = f"e{epoch}-{next(_NAMES)}"
        for batch, table in enumerate(tables):
            self._tables[(name, batch)] = table.combine_chunks()
        for kg, change in live.items():
            listed = tuple(replace(r, file=name) if r.file == NEW else r for r in runs[kg])
            for dropped in set(before[kg].runs if kg in before else ()) - set(listed):
                self._tables.pop((str(dropped.file), dropped.batch), None)
            self._groups[(operator, kg)] = GroupRow(epoch, listed, "")
            self._emitted[(operator, kg)] = change.emitted
        return sum(table.nbytes for table in tables)

    def groups(self, operator: str) -> set[int]:
        """Key groups of the operator that hold entries."""
        return {kg for (op, kg), row in self._groups.items() if op == operator and row.runs}

    def clear(self) -> None:
        """Drops everything."""
        self._groups.clear()
        self._emitted.clear()
        self._tables.clear()
