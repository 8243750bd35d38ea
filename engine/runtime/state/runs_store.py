"""What every store shares: a key group's row (its mark, the rows it emitted and its list
of sorted runs, ``sorted_runs.py``), reading entries by key and by due timer from a group's
runs, and planning a commit's new runs and merges. A store provides ``_rows`` (the groups'
rows) and ``_loaded`` (a run, mapped), and applies a plan (``_commit``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.state.base import (
    ENTRIES,
    FIELD,
    KG,
    TIMER,
    VALUE,
    Combine,
    KeyedChanges,
    StateStore,
)
from engine.runtime.state.sorted_runs import (
    Loaded,
    Run,
    Span,
    as_loaded,
    entry_hashes,
    entry_order,
    find,
    live_entries_of_groups,
    one_chunk,
    run_of,
    runs_to_merge,
    sorted_runs,
)

NEW = "@new"  # the name of a run a commit is about to write


@dataclass(frozen=True)
class GroupRow:
    """A key group's row: its mark, its runs (oldest first) as stored, and their text."""

    epoch: int
    runs: tuple[Run, ...]
    text: str


@dataclass(frozen=True)
class Plan:
    """A commit's plan: the groups' rows before it; the changes of the groups whose mark is
    before the epoch (a replay skips the others); their runs after it (a new run, then any
    merge), those to write named ``NEW``, numbered and placed as ``write_runs`` lays out
    ``tables`` (a new run merged away in the same commit is never written)."""

    before: dict[int, GroupRow]
    live: dict[int, KeyedChanges]
    runs: dict[int, list[Run]]
    tables: list[pa.Table]

    def listed(self, kg: int, name: str) -> list[Run]:
        """The group's runs once the new ones are written as the file ``name``."""
        return [replace(run, file=name) if run.file == NEW else run for run in self.runs[kg]]


class RunsStore(StateStore):
    """Reads and commit planning of the sorted-runs layout."""

    def _rows(self, operator: str, key_groups: Iterable[int]) -> dict[int, GroupRow]:
        """The rows of those of ``key_groups`` that have one."""
        raise NotImplementedError

    def _loaded(self, operator: str, run: Run) -> Loaded:
        """A run of entries, mapped."""
        raise NotImplementedError

    def _open(self, operator: str, rows: Mapping[int, GroupRow]) -> dict[int, list[Loaded | Run]]:
        """The groups' runs, mapped, oldest first."""
        return {kg: [self._loaded(operator, run) if run.file else run for run in row.runs]
                for kg, row in rows.items()}

    def marks(self, operator: str, key_groups: Iterable[int]) -> dict[int, int]:
        """Each group's mark."""
        return {kg: row.epoch for kg, row in self._rows(operator, key_groups).items()}

    def read_entries(self, operator: str, wanted: pa.Table) -> pa.Table:
        """A binary search per wanted key in each of its group's runs, newest first."""
        if wanted.num_rows == 0:
            return ENTRIES.empty_table()
        kgs = one_chunk(wanted[KG]).to_numpy(zero_copy_only=False)
        hashes = entry_hashes(wanted[FIELD])
        # Sorted by (group, hash) once: each group's stretch is then sorted for its search.
        order = entry_order(kgs, hashes)
        kgs, hashes = kgs[order], hashes[order]
        groups, starts = np.unique(kgs, return_index=True)
        ends = [*starts[1:].tolist(), len(kgs)]
        opened = self._open(operator, self._rows(operator, groups.tolist()))
        spans = [Span(opened[kg][::-1], start, end)
                 for kg, start, end in zip(groups.tolist(), starts.tolist(), ends, strict=True)
                 if kg in opened]
        searched = one_chunk(wanted[FIELD]).cast(pa.string()).take(pa.array(order))
        positions, rows = find(spans, searched, hashes)
        found = pa.Table.from_arrays([pa.array(kgs[positions].astype(np.int32)), *rows.columns],
                                     schema=ENTRIES)
        self.bytes_read += found[FIELD].nbytes + found[VALUE].nbytes
        return found

    def fire_timers(
        self, operator: str, key_groups: Iterable[int], until: int, combine: Combine | None = None
    ) -> pa.Table:
        """The due entries of the groups' runs (with ``combine``, their versions folded)."""
        opened = self._open(operator, self._rows(operator, key_groups))
        due = live_entries_of_groups({kg: runs[::-1] for kg, runs in opened.items()}, until,
                                     combine)
        parts = [pa.Table.from_arrays([pa.array(np.full(rows.num_rows, kg, np.int32)),
                                       *rows.select([TIMER, FIELD, VALUE]).columns],
                                      schema=ENTRIES)
                 for kg, rows in sorted(due.items()) if rows.num_rows]
        found = pa.concat_tables(parts) if parts else ENTRIES.empty_table()
        self.bytes_read += found[FIELD].nbytes + found[VALUE].nbytes
        return found

    def commit_entries(
        self, operator: str, epoch: int, changes: Mapping[int, KeyedChanges],
        combine: Combine | None = None,
    ) -> int:
        """Plans the commit (``_planned``); the store applies it (``_commit``)."""
        if not changes:
            return 0
        return self._commit(operator, epoch, self._planned(operator, epoch, changes, combine))

    def _commit(self, operator: str, epoch: int, plan: Plan) -> int:
        """Writes the plan's runs, then each live group's row with its mark and emitted
        rows, atomically per group, unless its mark reached the epoch meanwhile; returns the
        bytes written."""
        raise NotImplementedError

    def _planned(
        self, operator: str, epoch: int, changes: Mapping[int, KeyedChanges],
        combine: Combine | None = None,
    ) -> Plan:
        """The commit's ``Plan``."""
        before = self._rows(operator, changes)
        live = {kg: c for kg, c in changes.items() if kg not in before or before[kg].epoch < epoch}
        putting = [kg for kg, c in live.items() if c.puts is not None and c.puts.num_rows]
        new_runs = dict(zip(putting, sorted_runs([live[kg].puts for kg in putting]),  # type: ignore[misc]
                            strict=True)) if putting else {}
        loaded = self._open(operator, before)
        groups: dict[int, list[Loaded | Run]] = {}
        for kg, change in live.items():
            group = groups[kg] = list(loaded.get(kg, ()))
            if kg in new_runs:
                group.append(_new_run(new_runs[kg], change.expire))
            elif change.expire is not None and _expires_any(group, change.expire):
                _append_expiry(group, change.expire)
        tables: list[pa.Table] = []
        written = 0
        runs: dict[int, list[Run]] = {}
        for kg, items in self._merged(groups, combine).items():
            runs[kg] = []
            for item in items:
                run = run_of(item)
                if isinstance(item, Loaded) and run.file == NEW:
                    run = replace(run, batch=len(tables), start=written)
                    tables.append(item.table)
                    written += item.table.num_rows
                runs[kg].append(run)
        return Plan(before, live, runs, tables)

    def _merged(
        self, groups: dict[int, list[Loaded | Run]], combine: Combine | None = None
    ) -> dict[int, list[Loaded | Run]]:
        """Each group with its newest runs merged into one where ``runs_to_merge`` says;
        all the merges in one sort (``live_entries_of_groups``). A merge keeps the latest
        expiry of the runs it takes in while older runs remain, which it still hides."""
        counts = {kg: runs_to_merge([run_of(g) for g in group]) for kg, group in groups.items()}
        merging = {kg: group[-counts[kg] :][::-1] for kg, group in groups.items() if counts[kg]}
        together = live_entries_of_groups(merging, combine=combine) if merging else {}
        for kg, count in counts.items():
            if not count:
                continue
            group = groups[kg]
            self.bytes_read += sum(g.table.nbytes for g in group[-count:] if isinstance(g, Loaded))
            bounds = [run_of(g).expire for g in group[-count:] if run_of(g).expire is not None]
            expire = max(bounds) if bounds and count < len(group) else None  # type: ignore[type-var]
            del group[-count:]
            if together[kg].num_rows:
                group.append(_new_run(together[kg], expire))
            elif expire is not None:
                group.append(Run(None, 0, expire))
        return groups


def _new_run(table: pa.Table, expire: int | None) -> Loaded:
    first = int(pc.min(table[TIMER]).as_py())
    return as_loaded(Run(NEW, table.num_rows, expire, first=first), table)


def _expires_any(group: Sequence[Loaded | Run], expire: int) -> bool:
    """Whether an expiry at ``expire`` may hide any of the group's entries that newer runs
    do not hide already (else a run for it would cost merges and save nothing)."""
    bound = None
    for item in reversed(group):
        run = run_of(item)
        if (bound is None or expire > bound) and run.may_hold_timers_until(expire):
            return True
        if run.expire is not None:
            bound = run.expire if bound is None else max(bound, run.expire)
    return False


def _append_expiry(group: list[Loaded | Run], expire: int) -> None:
    """Appends a run of no entries expiring ``expire``; one the group ends with already
    takes the later bound instead (both hide the same older runs), so expiries without
    puts never pile up into runs that would merge a large run for nothing."""
    newest = run_of(group[-1]) if group else None
    if newest is not None and newest.file is None and newest.expire is not None:
        group[-1] = Run(None, 0, max(newest.expire, expire))
    else:
        group.append(Run(None, 0, expire))


@lru_cache(maxsize=8192)
def runs_from_json(text: str) -> tuple[Run, ...]:
    """Runs from their stored JSON list (a group's list is read every epoch, and most
    groups' lists are the ones this process read or wrote the epoch before)."""
    return tuple(Run.from_json(item) for item in json.loads(text))


def runs_json(runs: Sequence[Run]) -> str:
    """A group's list of runs as stored."""
    return json.dumps([run.as_json() for run in runs])
