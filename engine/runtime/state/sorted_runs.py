"""Keyed entries as sorted runs: immutable Arrow files, each sorted by a 64-bit hash of
(timer, field), looked up by binary search, merged size-tiered (a log-structured layout).

A key group's state is a list of runs, oldest first. A commit adds one run with the
entries it put, and the timers it fired (tombstones: they hide older runs' entries of those
timers, not the run's own puts). Reading a key is a ``searchsorted`` per run on its
memory-mapped hash column, newest run first, so it costs the wanted keys times the runs,
not the group's size. Runs merge when the newer one grows close to the older one's size,
so a group keeps a few runs whose sizes shrink geometrically, and each entry is rewritten
a few times over its life instead of with every epoch that touches its group.

Hashes only order and find entries; a match is confirmed on (timer, field), and entries
whose hashes collide are told apart by the field itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.state.keyed import FIELD, TIMER, VALUE

HASH = "h"
RUN_SCHEMA = pa.schema(
    [(HASH, pa.uint64()), (TIMER, pa.int64()), (FIELD, pa.string()), (VALUE, pa.string())]
)
_FOUND = pa.schema([RUN_SCHEMA.field(n) for n in (TIMER, FIELD, VALUE)])  # found by ``lookup``
# A run merges into the one before it while that one holds at most this many times its
# rows (below 2, so each entry is rewritten about log2(group / epoch's input) times); the
# factor differs per key group (``merge_factor``) so that, under input spread evenly over
# the groups, their large merges fall in different epochs.
_FACTORS = (1.0, 1.25, 1.5, 1.75)
MAX_RUNS = 10

_P = 0x100000001B3
_POWERS = np.array([pow(_P, i, 1 << 64) for i in range(256)], dtype=np.uint64)
_SHORT = 24  # strings up to this long are hashed one position at a time


@dataclass(frozen=True)
class Run:
    """One immutable run: the file and record batch holding it (no file for a run of
    tombstones only), its rows and the timers fired when it was written."""

    file: str | None
    rows: int
    fired: tuple[int, ...] = ()
    batch: int = 0

    def as_json(self) -> list[object]:
        return [self.file, self.batch, self.rows, list(self.fired)]

    @staticmethod
    def from_json(data: list[Any]) -> Run:
        name, batch, rows, fired = data
        return Run(file=name, rows=int(rows), fired=tuple(fired), batch=int(batch))


@dataclass
class Loaded:
    """A run with its table (memory-mapped) and its hash column as a NumPy view."""

    run: Run
    table: pa.Table
    hashes: np.ndarray = field(repr=False)
    timers: np.ndarray = field(repr=False)


def _fmix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33))


def entry_hashes(
    timers: pa.Array | pa.ChunkedArray, fields: pa.Array | pa.ChunkedArray
) -> np.ndarray:
    """A 64-bit hash of each (timer, field), vectorised over the strings' bytes."""
    fields = one_chunk(fields).cast(pa.string())
    count = len(fields)
    if count == 0:
        return np.zeros(0, dtype=np.uint64)
    offsets = np.frombuffer(fields.buffers()[1], dtype=np.int32)[
        fields.offset : fields.offset + count + 1
    ]
    start, end = int(offsets[0]), int(offsets[-1])
    lengths = np.diff(offsets).astype(np.int64)
    data_buffer = fields.buffers()[2]
    text = np.zeros(0, np.uint8) if data_buffer is None else np.frombuffer(data_buffer, np.uint8)
    longest = int(lengths.max())
    if longest <= _SHORT:
        by_text = _short_text_hashes(text, offsets[:-1], lengths, longest)
    else:
        by_text = _text_hashes(text[start:end], offsets - start, lengths, count)
    timer_values = one_chunk(timers).cast(pa.int64()).to_numpy(zero_copy_only=False)
    by_timer = _fmix(timer_values.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    return _fmix(by_text ^ (lengths.astype(np.uint64) * np.uint64(0x2545F4914F6CDD1D)) ^ by_timer)


def _short_text_hashes(
    text: np.ndarray, starts: np.ndarray, lengths: np.ndarray, longest: int
) -> np.ndarray:
    """sum(byte[i] * P**i) per string, one step per position (short strings)."""
    hashes = np.zeros(len(starts), np.uint64)
    starts = starts.astype(np.int64)
    for position in range(longest):
        active = lengths > position
        if active.all():
            hashes += text[starts + position].astype(np.uint64) * _POWERS[position]
        else:
            at = np.flatnonzero(active)
            hashes[at] += text[starts[at] + position].astype(np.uint64) * _POWERS[position]
    return hashes


def _text_hashes(
    data: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, count: int
) -> np.ndarray:
    """sum(byte[i] * P**i) per string, over all bytes at once (long strings)."""
    values = data.astype(np.uint64)
    owner = np.repeat(np.arange(count), lengths)
    position = np.arange(len(values)) - offsets[:-1][owner]
    powers = _powers(int(lengths.max()))
    sums = np.concatenate(([np.uint64(0)], np.cumsum(values * powers[position], dtype=np.uint64)))
    relative = offsets.astype(np.int64)
    return sums[relative[1:]] - sums[relative[:-1]]


def _powers(longest: int) -> np.ndarray:
    global _POWERS
    if longest > len(_POWERS):
        _POWERS = np.array([pow(_P, i, 1 << 64) for i in range(2 * longest)], dtype=np.uint64)
    return _POWERS


def one_chunk(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The array, or the chunked array as one array (its only chunk, or them combined)."""
    if isinstance(array, pa.ChunkedArray):
        return array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    return array


def entry_order(groups: np.ndarray, hashes: np.ndarray, *, stable: bool = False) -> np.ndarray:
    """The order that sorts entries by (group, hash), exactly: one NumPy sort of a 64-bit
    key made of the group and the hash's top 48 bits (several times faster than
    ``np.lexsort``), checked against the whole hashes, which differ in those bits alone so
    rarely that a ``lexsort`` then is no cost (nor for groups past 2**16, which the key
    cannot hold; key groups stop at 32768). ``stable`` keeps entries of equal (group, hash)
    in their order (a stable sort is quick on runs already sorted)."""
    if not len(hashes):
        return np.zeros(0, np.int64)
    if groups.min() < 0 or groups.max() >= 1 << 16:
        return np.lexsort((hashes, groups))
    key = (groups.astype(np.uint64) << np.uint64(48)) | (hashes >> np.uint64(16))
    order = np.argsort(key, kind="stable" if stable else None)
    ordered_groups, ordered = groups[order], hashes[order]
    if np.any((ordered_groups[1:] == ordered_groups[:-1]) & (ordered[1:] < ordered[:-1])):
        order = np.lexsort((hashes, groups))  # two hashes alike in their top 48 bits
    return order


def sorted_runs(puts: Sequence[pa.Table], hashes: np.ndarray) -> list[pa.Table]:
    """Each of ``puts`` (``TIMER``, ``FIELD``, ``VALUE`` rows; ``hashes`` their
    ``entry_hashes``, in order) as a run table sorted by hash, all in one sort: a commit
    makes a run for most of its groups."""
    sizes = [table.num_rows for table in puts]
    owner = np.repeat(np.arange(len(puts)), sizes)
    order = entry_order(owner, hashes)

    def column(name: str) -> pa.ChunkedArray:
        kind = RUN_SCHEMA.field(name).type
        return pa.chunked_array(
            [chunk for table in puts for chunk in table[name].cast(kind).chunks], kind
        )

    runs = pa.Table.from_arrays(
        [pa.array(hashes[order], pa.uint64()),
         *[column(name).take(order) for name in (TIMER, FIELD, VALUE)]],
        schema=RUN_SCHEMA,
    )
    starts = np.concatenate(([0], np.cumsum(sizes))).tolist()
    return [runs.slice(start, end - start) for start, end in pairwise(starts)]


def write_runs(path: str, tables: Sequence[pa.Table]) -> int:
    """Writes run tables (none empty) as one Arrow IPC file, the i-th table as record
    batch i; returns the file's size."""
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, RUN_SCHEMA) as writer:
        for table in tables:
            writer.write_batch(table.combine_chunks().to_batches()[0])
    return os.path.getsize(path)


class RunFile:
    """A file of runs, memory-mapped: its batches are read without copying."""

    def __init__(self, path: str) -> None:
        self.reader = pa.ipc.open_file(pa.memory_map(path, "r"))
        self._batches: dict[int, tuple[pa.Table, np.ndarray, np.ndarray]] = {}

    def loaded(self, run: Run, batch: int | None = None) -> Loaded:
        """The run at its batch of this file, or at ``batch`` (a file holding that run
        alone). Each batch's views are made once: a file never changes, and a group reads
        its runs every epoch."""
        batch = run.batch if batch is None else batch
        views = self._batches.get(batch)
        if views is None:
            table = pa.Table.from_batches([self.reader.get_batch(batch)])
            views = self._batches[batch] = (
                table,
                one_chunk(table[HASH]).to_numpy(zero_copy_only=True),
                one_chunk(table[TIMER]).to_numpy(zero_copy_only=True),
            )
        table, hashes, timers = views
        return Loaded(run=run, table=table, hashes=hashes, timers=timers)


class MappedFiles(dict[str, RunFile]):
    """Run files a process has mapped, by path: a file never changes once written, so it
    stays mapped while groups name it."""

    def file(self, path: str) -> RunFile:
        """The file at ``path``, mapped here once."""
        mapped = self.get(path)
        if mapped is None:
            mapped = self[path] = RunFile(path)
        return mapped

    def unmap_deleted(self, root: str | None = None) -> None:
        """Unmaps the files (under ``root``) another process deleted, so that their disk
        space does not stay taken while mapped here."""
        for path in [p for p in self if root is None or p.startswith(root + os.sep)]:
            if not os.path.exists(path):
                del self[path]


def lookup(
    runs: Sequence[Loaded | Run], wanted: pa.Table, hashes: np.ndarray, *, presorted: bool = False
) -> tuple[np.ndarray, pa.Table]:
    """The stored entries among ``wanted`` (``TIMER``, ``FIELD``, and ``hashes`` their
    ``entry_hashes``; ``presorted`` if in hash order), from ``runs`` newest first:
    (positions in ``wanted`` that were found, their entries: ``TIMER``, ``FIELD``,
    ``VALUE``)."""
    timers = one_chunk(wanted[TIMER]).to_numpy(zero_copy_only=False)
    fields = one_chunk(wanted[FIELD]).cast(pa.string())
    # Sorted needles search faster.
    open_rows = np.arange(len(hashes)) if presorted else np.argsort(hashes, kind="stable")
    found_at: list[np.ndarray] = []
    found_rows: list[pa.Table] = []
    for loaded in runs:
        if not len(open_rows):
            break
        if isinstance(loaded, Loaded) and loaded.table.num_rows:
            hits, rows = _search(loaded, hashes[open_rows], timers[open_rows], fields, open_rows)
            if len(hits):
                found_at.append(open_rows[hits])
                found_rows.append(rows)
                open_rows = np.delete(open_rows, hits)
        run = loaded.run if isinstance(loaded, Loaded) else loaded
        if run.fired and len(open_rows):
            hidden = np.isin(timers[open_rows], np.array(run.fired, np.int64))
            open_rows = open_rows[~hidden]
    if not found_rows:
        return np.zeros(0, np.int64), _FOUND.empty_table()
    return np.concatenate(found_at), pa.concat_tables(found_rows)


def _search(
    loaded: Loaded, hashes: np.ndarray, timers: np.ndarray, fields: pa.Array, at_rows: np.ndarray
) -> tuple[np.ndarray, pa.Table]:
    """Which of the wanted (``hashes``, ``timers``, and ``fields`` at ``at_rows``) ``loaded``
    holds: their positions among the wanted, and the run rows holding them (``TIMER``,
    ``FIELD``, ``VALUE``). Only the candidates' fields and values are gathered from the run,
    in one call: its hashes and timers are read as arrays already."""
    stored = loaded.hashes
    at = np.searchsorted(stored, hashes)
    candidates = np.flatnonzero(stored[np.minimum(at, len(stored) - 1)] == hashes)
    if not len(candidates):
        return candidates, _FOUND.empty_table()
    rows = at[candidates]
    stored_fields = one_chunk(loaded.table[FIELD])
    taken = stored_fields.take(pa.array(rows))
    same = loaded.timers[rows] == timers[candidates]
    same &= np.asarray(
        pc.equal(taken, fields.take(at_rows[candidates])).to_numpy(zero_copy_only=False)
    )
    if not same.all():
        for i in np.flatnonzero(~same):  # a hash shared by different entries: rare
            row = _scan_equal_hash(
                loaded,
                int(rows[i]),
                int(timers[candidates[i]]),
                fields[int(at_rows[candidates[i]])].as_py(),
            )
            if row is not None:
                rows[i], same[i] = row, True
        candidates, rows = candidates[same], rows[same]
        taken = stored_fields.take(pa.array(rows))
    values = one_chunk(loaded.table[VALUE]).take(pa.array(rows))
    return candidates, pa.Table.from_arrays(
        [pa.array(loaded.timers[rows]), taken, values], schema=_FOUND)


def _scan_equal_hash(loaded: Loaded, first: int, timer: int, name: str) -> int | None:
    row = first
    while row < len(loaded.hashes) and loaded.hashes[row] == loaded.hashes[first]:
        if loaded.timers[row] == timer and loaded.table[FIELD][row].as_py() == name:
            return row
        row += 1
    return None


def live_entries(runs: Sequence[Loaded | Run], until: int | None = None) -> pa.Table:
    """The entries ``runs`` (newest first) hold, each (timer, field) once from its newest
    run, none hidden by a newer run's fired timers; with ``until``, only timers <= it.
    Sorted by hash, as a run."""
    parts = []
    hidden: set[int] = set()
    for rank, loaded in enumerate(runs):
        run = loaded.run if isinstance(loaded, Loaded) else loaded
        if isinstance(loaded, Loaded) and loaded.table.num_rows:
            if until is not None and loaded.timers.min() > until:  # none due: most epochs
                hidden.update(run.fired)
                continue
            table = loaded.table
            keep = None
            if until is not None:
                keep = pc.less_equal(table[TIMER], until)
            if hidden:
                alive = pc.invert(pc.is_in(table[TIMER], pa.array(sorted(hidden), pa.int64())))
                keep = alive if keep is None else pc.and_(keep, alive)
            if keep is not None:
                table = table.filter(keep)
            if table.num_rows:
                parts.append(
                    table.append_column("rank", pa.array(np.full(table.num_rows, rank), pa.int32()))
                )
        hidden.update(run.fired)
    if not parts:
        return RUN_SCHEMA.empty_table()
    table = pa.concat_tables(parts)
    if len(parts) > 1:
        table = _newest_of_each(table)
    return table.drop_columns(["rank"])


def live_entries_of_groups(groups: Mapping[int, Sequence[Loaded]]) -> dict[int, pa.Table]:
    """``live_entries`` of several key groups' runs (each group's newest first, none with
    fired timers), in one sort over all of them: a commit merges most of its groups' runs,
    and one sort per group cost more in calls than in rows. Exact per group, as
    ``live_entries``, should different entries of a group share a hash."""
    loaded = [(kg, run) for kg in sorted(groups) for run in groups[kg] if run.table.num_rows]
    if not loaded:
        return {kg: RUN_SCHEMA.empty_table() for kg in groups}
    sizes = [run.table.num_rows for _, run in loaded]
    kgs = np.repeat(np.array([kg for kg, _ in loaded], np.int64), sizes)
    hashes = np.concatenate([run.hashes for _, run in loaded])
    timers = np.concatenate([run.timers for _, run in loaded])
    # By group and hash, newest first among equal hashes: each group's runs come newest
    # first and each is sorted, so the stable sort merges sorted stretches.
    order = entry_order(kgs, hashes, stable=True)
    table = pa.concat_tables([run.table for _, run in loaded]).take(order)
    kgs, hashes, timers = kgs[order], hashes[order], timers[order]
    first = np.ones(len(kgs), dtype=bool)
    repeat = np.flatnonzero((kgs[1:] == kgs[:-1]) & (hashes[1:] == hashes[:-1]))
    if len(repeat):
        fields = one_chunk(table[FIELD])
        same = (timers[repeat + 1] == timers[repeat]) & np.asarray(
            pc.equal(fields.take(repeat + 1), fields.take(repeat)).to_numpy(zero_copy_only=False)
        )
        if not same.all():  # different entries of a group share a hash: rare
            return {kg: live_entries(runs) for kg, runs in groups.items()}
        first[repeat + 1] = False
    table, kgs = table.filter(first), kgs[first]
    wanted = np.array(list(groups), np.int64)
    starts = np.searchsorted(kgs, wanted, side="left")
    ends = np.searchsorted(kgs, wanted, side="right")
    return {
        kg: table.slice(int(start), int(end - start))
        for kg, start, end in zip(groups, starts, ends, strict=True)
    }


def _newest_of_each(table: pa.Table) -> pa.Table:
    """Rows sorted by hash, each (timer, field) once, from its lowest rank: a NumPy sort on
    (hash, rank); only where different entries share a hash, a sort on the entries too."""
    hashes = one_chunk(table[HASH]).to_numpy()
    ranks = one_chunk(table["rank"]).to_numpy()
    order = np.lexsort((ranks, hashes))
    table = table.take(order)
    hashes = hashes[order]
    same_hash = np.flatnonzero(hashes[1:] == hashes[:-1])
    if len(same_hash):
        timers = one_chunk(table[TIMER]).to_numpy()
        fields = one_chunk(table[FIELD])
        same_entry = (timers[same_hash + 1] == timers[same_hash]) & np.asarray(
            pc.equal(fields.take(same_hash + 1), fields.take(same_hash)).to_numpy(
                zero_copy_only=False
            )
        )
        if not same_entry.all():  # different entries share a hash: rare
            keys = [(HASH, "ascending"), (TIMER, "ascending"), (FIELD, "ascending")]
            table = table.take(pc.sort_indices(table, [*keys, ("rank", "ascending")]))
    return table.filter(_first_of_each(table))


def _first_of_each(table: pa.Table) -> np.ndarray:
    """True for a row whose (hash, timer, field) differs from the row before it."""
    hashes = one_chunk(table[HASH]).to_numpy()
    timers = one_chunk(table[TIMER]).to_numpy()
    fields = one_chunk(table[FIELD])
    first = np.ones(table.num_rows, dtype=bool)
    if table.num_rows > 1:
        repeat = (hashes[1:] == hashes[:-1]) & (timers[1:] == timers[:-1])
        where = np.flatnonzero(repeat)
        if len(where):
            equal = pc.equal(fields.take(where + 1), fields.take(where)).to_numpy(
                zero_copy_only=False
            )
            first[where[equal] + 1] = False
    return first


def merge_factor(key_group: int) -> float:
    """How many times a newer run's rows the run before it may hold and still take it in."""
    return _FACTORS[key_group % len(_FACTORS)]


def runs_to_merge(runs: Sequence[Run], key_group: int) -> int:
    """How many of the newest runs to merge into one (0 or >= 2): size-tiered, the newest
    run taking in the runs before it while they are not much larger; all of them past
    ``MAX_RUNS``."""
    if len(runs) > MAX_RUNS:
        return len(runs)
    factor = merge_factor(key_group)
    count = 1
    rows = runs[-1].rows if runs else 0
    while count < len(runs) and runs[-1 - count].rows <= factor * rows:
        rows += runs[-1 - count].rows
        count += 1
    return count if count >= 2 else 0
