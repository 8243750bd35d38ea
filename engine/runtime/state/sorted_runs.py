"""Entries as sorted runs (a log-structured layout, as Hummock's sorted string tables):
immutable Arrow files, each sorted by a 64-bit hash of the entry's key (``FIELD``).

A key group's state is a list of runs, oldest first. A commit adds a run of the entries it
put and, where it expired entries, their bound (``Run.expire``: it hides older runs'
entries whose timers are at or before it). Reading a key is a ``searchsorted`` per run on
its memory-mapped hash column, newest first: it costs the wanted keys times the runs, not
the group's size, and the newest version found decides (an expired one: the key is gone).
Runs merge size-tiered, so an entry is rewritten a few times over its life, not with every
epoch that touches its group; a merge leaves expired entries out. A match is confirmed on
the key itself. A folding operator's (``Combine``) versions are deltas, all folded when
read; the others' newest version is the value.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.runtime.state.base import FIELD, TIMER, VALUE, Combine

HASH = "h"
RUN_SCHEMA = pa.schema(
    [(HASH, pa.uint64()), (TIMER, pa.int64()), (FIELD, pa.string()), (VALUE, pa.string())]
)
_FOUND = pa.schema([RUN_SCHEMA.field(n) for n in (TIMER, FIELD, VALUE)])  # found by ``find``
# A group keeps up to TIER - 1 runs of each size; the TIER-th merges them into one run of
# the next size, about TIER times larger (``runs_to_merge``): each entry is rewritten about
# log_TIER(group's rows / an epoch's rows of it) times. Larger tiers cost a lookup more
# runs than they save in merges (bench state).
TIER = 3
SAME_SIZE = 2.0
MAX_RUNS = 14
_NEVER = np.iinfo(np.int64).min
_WRITTEN = re.compile(r"^e(-?\d+)-[0-9a-f]+$")
_P = 0x100000001B3
_POWERS = np.array([pow(_P, i, 1 << 64) for i in range(256)], dtype=np.uint64)


@dataclass(frozen=True)
class Run:
    """One immutable run: the file holding it (none for a run of no entries), its rows, the
    bound of the entries it expired (``expire``: older runs' entries with timers at or
    before it are gone) and its earliest timer (``first``: whether any of its entries can
    be due or expire is known without reading them). A commit writes its runs end to end
    as its file's one record batch, numbered ``batch``, the run from row ``start``."""

    file: str | None
    rows: int
    expire: int | None = None
    batch: int = 0
    start: int = 0
    first: int | None = None

    def as_json(self) -> list[object]:
        return [self.file, self.batch, self.rows, self.expire, self.start, self.first]

    @staticmethod
    def from_json(data: list[Any]) -> Run:
        name, batch, rows, expire, start, first = data
        return Run(name, int(rows), expire, int(batch), int(start), first)

    def may_hold_timers_until(self, until: int) -> bool:
        """Whether the run holds entries whose timers are at or before ``until``."""
        return self.rows > 0 and (self.first is None or self.first <= until)


@dataclass(frozen=True)
class Batch:
    """A record batch holding runs end to end, its columns as NumPy views and arrays."""

    table: pa.Table
    hashes: np.ndarray = field(repr=False)
    timers: np.ndarray = field(repr=False)
    fields: pa.Array = field(repr=False)
    values: pa.Array = field(repr=False)

    @staticmethod
    def of(table: pa.Table) -> Batch:
        columns = [one_chunk(table[name]) for name in RUN_SCHEMA.names]
        return Batch(table, columns[0].to_numpy(), columns[1].to_numpy(), *columns[2:])


@dataclass
class Loaded:
    """A run with its rows (memory-mapped), their hashes and timers as NumPy views, and the
    batch it is rows ``start`` onwards of (none yet: a run not written)."""

    run: Run
    table: pa.Table
    hashes: np.ndarray = field(repr=False)
    timers: np.ndarray = field(repr=False)
    source: Batch | None = field(default=None, repr=False)
    start: int = 0

    def in_batch(self) -> tuple[Batch, int]:
        """The batch holding the run and the run's first row in it."""
        if self.source is None:
            self.source, self.start = Batch.of(self.table.combine_chunks()), 0
        return self.source, self.start


def as_loaded(run: Run, table: pa.Table) -> Loaded:
    """A run with its table, not from a file."""
    return Loaded(run, table, one_chunk(table[HASH]).to_numpy(),
                  one_chunk(table[TIMER]).to_numpy())


def entry_hashes(fields: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A 64-bit hash of each key: sum(byte[i] * P**i) over its bytes, mixed with its length,
    one vectorised step per byte position (keys are short, and per-byte index arrays cost
    more than the steps)."""
    global _POWERS
    fields = one_chunk(fields).cast(pa.string())
    if len(fields) == 0:
        return np.zeros(0, dtype=np.uint64)
    offsets = np.frombuffer(fields.buffers()[1], np.int32)[
        fields.offset : fields.offset + len(fields) + 1].astype(np.int64)
    lengths, starts = np.diff(offsets), offsets[:-1]
    data = fields.buffers()[2]
    text = np.zeros(0, np.uint8) if data is None else np.frombuffer(data, np.uint8)
    if lengths.max() > len(_POWERS):
        _POWERS = np.array([pow(_P, i, 1 << 64) for i in range(2 * lengths.max())], np.uint64)
    h, shortest = np.zeros(len(fields), np.uint64), lengths.min()
    for position in range(int(lengths.max())):
        at = slice(None) if shortest > position else np.flatnonzero(lengths > position)
        h[at] += text[starts[at] + position].astype(np.uint64) * _POWERS[position]
    h ^= lengths.astype(np.uint64) * np.uint64(0x2545F4914F6CDD1D)
    for factor in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):  # fmix64
        h = (h ^ (h >> np.uint64(33))) * np.uint64(factor)
    return h ^ (h >> np.uint64(33))


def one_chunk(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The array, or the chunked array as one array (its only chunk, or them combined)."""
    if isinstance(array, pa.ChunkedArray):
        return array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    return array


def entry_order(groups: np.ndarray, hashes: np.ndarray, *, stable: bool = False) -> np.ndarray:
    """The order that sorts entries by (group, hash): one NumPy sort of a 64-bit key of the
    group and the hash's top 48 bits (``np.lexsort`` where hashes tie in those bits or
    groups pass 2**16). ``stable`` keeps entries of equal (group, hash) in their order."""
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


def sorted_runs(puts: Sequence[pa.Table]) -> list[pa.Table]:
    """Each of ``puts`` (``TIMER``, ``FIELD``, ``VALUE`` rows) as a run table sorted by hash,
    all in one sort: a commit makes a run for most of its groups."""
    def column(name: str) -> pa.ChunkedArray:
        kind = RUN_SCHEMA.field(name).type
        return pa.chunked_array([c for table in puts for c in table[name].cast(kind).chunks], kind)

    sizes = [table.num_rows for table in puts]
    hashes = entry_hashes(column(FIELD))
    order = entry_order(np.repeat(np.arange(len(puts)), sizes), hashes)
    runs = pa.Table.from_arrays(
        [pa.array(hashes[order], pa.uint64()),
         *[column(name).take(order) for name in (TIMER, FIELD, VALUE)]], schema=RUN_SCHEMA)
    starts = np.concatenate(([0], np.cumsum(sizes))).tolist()
    return [runs.slice(start, end - start) for start, end in pairwise(starts)]


def write_runs(path: str, tables: Sequence[pa.Table]) -> int:
    """Writes run tables (none empty) end to end as one Arrow IPC file of one record batch
    (the i-th table from the row where the ones before it end); returns the file's size."""
    whole = pa.concat_tables([table.select(RUN_SCHEMA.names) for table in tables])
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, RUN_SCHEMA) as writer:
        writer.write_batch(whole.combine_chunks().to_batches()[0])
    return os.path.getsize(path)


class RunFile:
    """A file of runs, memory-mapped: its batch is read without copying, and its views
    made once (a file never changes, and a group reads its runs every epoch)."""

    def __init__(self, path: str) -> None:
        reader = pa.ipc.open_file(pa.memory_map(path, "r"))
        self.batch = Batch.of(pa.Table.from_batches([reader.get_batch(0)]))

    def loaded(self, run: Run, alone: bool = False) -> Loaded:
        """The run: its rows of the file's batch, from ``run.start`` (or the whole batch:
        a file holding the run ``alone``)."""
        start, whole = (0 if alone else run.start), self.batch
        end = start + run.rows
        return Loaded(run, whole.table.slice(start, run.rows), whole.hashes[start:end],
                      whole.timers[start:end], whole, start)


class MappedFiles(dict[str, RunFile]):
    """Run files a process has mapped, by path: a file never changes once written, so it
    stays mapped while groups name it."""

    def file(self, path: str) -> RunFile:
        """The file at ``path``, mapped here once."""
        if path not in self:
            self[path] = RunFile(path)
        return self[path]

    def collect(self, directory: str, named: set[str | None], epoch: int) -> None:
        """Deletes the run files in ``directory`` that no group names and that an epoch
        before ``epoch`` wrote (a file of this epoch may be an instance's that has yet to
        commit), and unmaps those another process deleted, so that their disk space does
        not stay taken while mapped here."""
        for entry in os.listdir(directory):
            name = entry.split(".")[0]
            written = _WRITTEN.match(name)
            if name not in named and written and int(written.group(1)) < epoch:
                self.pop(os.path.join(directory, entry), None)
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(directory, entry))
        self.forget(directory, deleted_only=True)

    def forget(self, root: str, deleted_only: bool = False) -> None:
        """Unmaps every file under ``root`` (its store was cleared), or those deleted."""
        for path in [p for p in self if p.startswith(root + os.sep)]:
            if not (deleted_only and os.path.exists(path)):
                del self[path]


def run_file_name(epoch: int) -> str:
    """A unique name for a file of runs that ``epoch`` writes (``MappedFiles.collect``)."""
    return f"e{epoch}-{uuid.uuid4().hex}"


@dataclass(frozen=True)
class Span:
    """One key group's wanted keys (rows ``first`` to ``end`` of the sorted wanted) and its
    runs, newest first."""

    runs: Sequence[Loaded | Run]
    first: int
    end: int


def find(
    spans: Sequence[Span], fields: pa.Array, hashes: np.ndarray
) -> tuple[np.ndarray, pa.Table]:
    """The newest version of each wanted key (``fields``, ``hashes`` their ``entry_hashes``,
    sorted by hash within each span) in its group's runs, unless a newer run expired it:
    (positions among the wanted found, their ``TIMER``, ``FIELD``, ``VALUE``).

    Runs are searched newest first, one ``searchsorted`` per run; what the groups' runs of
    one age found is confirmed and gathered per record batch (a commit writes all its
    groups' runs as one), not per run: calls, not rows, are most of a lookup's time."""
    open_rows = np.ones(len(hashes), dtype=bool)
    bound = np.full(len(hashes), _NEVER, np.int64)  # expired by newer runs: timers <= it
    at = np.zeros(len(hashes), np.int64)  # each wanted key's row in its run's batch
    found_at: list[np.ndarray] = []
    found_rows: list[pa.Table] = []
    for rank in range(max((len(span.runs) for span in spans), default=0)):
        batches: dict[int, tuple[Batch, list[tuple[Span, Loaded]]]] = {}
        expiring: list[tuple[Span, int]] = []
        for span in spans:
            if rank >= len(span.runs) or not open_rows[span.first : span.end].any():
                continue
            item = span.runs[rank]
            if run_of(item).expire is not None:
                expiring.append((span, run_of(item).expire))  # type: ignore[arg-type]
            if isinstance(item, Loaded) and item.table.num_rows:
                batch, start = item.in_batch()
                where = np.searchsorted(item.hashes, hashes[span.first : span.end])
                at[span.first : span.end] = np.minimum(where, len(item.hashes) - 1) + start
                batches.setdefault(id(batch), (batch, []))[1].append((span, item))
        for batch, searched in batches.values():
            hits, rows = _confirmed(batch, searched, at, open_rows, hashes, fields)
            open_rows[hits] = False  # the newest version decides, live or expired
            live = batch.timers[rows] > bound[hits]
            hits, rows = hits[live], rows[live]
            found_at.append(hits)
            found_rows.append(pa.Table.from_arrays(
                [pa.array(batch.timers[rows]), batch.fields.take(pa.array(rows)),
                 batch.values.take(pa.array(rows))], schema=_FOUND))
        for span, expire in expiring:
            bound[span.first : span.end] = np.maximum(bound[span.first : span.end], expire)
    if not found_rows:
        return np.zeros(0, np.int64), _FOUND.empty_table()
    return np.concatenate(found_at), pa.concat_tables(found_rows)


def _confirmed(
    batch: Batch,
    searched: list[tuple[Span, Loaded]],
    at: np.ndarray,
    open_rows: np.ndarray,
    hashes: np.ndarray,
    fields: pa.Array,
) -> tuple[np.ndarray, np.ndarray]:
    """Which still open wanted keys of the ``searched`` spans ``batch`` holds at their row
    ``at`` (same hash and key; keys whose hashes collide are looked for among the rows of
    the same hash): their positions and rows."""
    chosen = np.zeros(len(hashes), dtype=bool)
    for span, _ in searched:
        chosen[span.first : span.end] = True
    wanted = np.flatnonzero(chosen & open_rows)
    rows = at[wanted]
    same_hash = batch.hashes[rows] == hashes[wanted]
    wanted, rows = wanted[same_hash], rows[same_hash]
    same = np.asarray(pc.equal(batch.fields.take(pa.array(rows)),
                               fields.take(pa.array(wanted))).to_numpy(zero_copy_only=False))
    for i in np.flatnonzero(~same):  # a hash shared by different keys: rare
        run = next(r for s, r in searched if s.first <= wanted[i] < s.end)
        row, end, name = int(rows[i]), run.in_batch()[1] + run.run.rows, fields[int(wanted[i])]
        while row < end and batch.hashes[row] == hashes[wanted[i]]:
            if batch.fields[row] == name:
                rows[i], same[i] = row, True
                break
            row += 1
    return wanted[same], rows[same]


def live_entries_of_groups(
    groups: Mapping[int, Sequence[Loaded | Run]],
    until: int | None = None,
    combine: Combine | None = None,
) -> dict[int, pa.Table]:
    """The entries each group's runs (newest first) hold, each key once, none a newer run
    expired, in one sort over all the groups (a commit merges most of its groups' runs, and
    a closing epoch fires the timers of every group): with ``until``, only timers at or
    before it; with ``combine``, each key's versions folded, else its newest. Sorted by
    hash within each group, as a run."""
    loaded = [(kg, kept) for kg in sorted(groups) for kept in _live_runs(groups[kg], until)]
    if not loaded:
        return {kg: RUN_SCHEMA.empty_table() for kg in groups}
    sizes = [run.table.num_rows for _, run in loaded]
    kgs = np.repeat(np.array([kg for kg, _ in loaded], np.int64), sizes)
    hashes = np.concatenate([run.hashes for _, run in loaded])
    table = pa.concat_tables([run.table.select(RUN_SCHEMA.names) for _, run in loaded])
    # By group and hash, newest first among equal hashes: each group's runs come newest
    # first and each is sorted, so the stable sort merges sorted stretches.
    order = entry_order(kgs, hashes, stable=True)
    repeat, same = _repeats(kgs, hashes, table, order)
    if not same.all():  # different keys of a group share a hash: rare; sort by key too
        keys = pa.table({"g": kgs, "h": hashes, "f": one_chunk(table[FIELD]),
                         "n": np.arange(len(kgs))})
        order = pc.sort_indices(keys, [(name, "ascending") for name in "ghfn"]).to_numpy()
        repeat, same = _repeats(kgs, hashes, table, order)
    first = np.ones(len(kgs), dtype=bool)
    first[repeat[same] + 1] = False
    table, kgs = table.take(pa.array(order)), kgs[order][first]
    table = table.filter(first) if combine is None else _folded(table, first, combine)
    wanted = np.array(list(groups), np.int64)
    starts = np.searchsorted(kgs, wanted, side="left")
    ends = np.searchsorted(kgs, wanted, side="right")
    return {kg: table.slice(int(start), int(end - start))
            for kg, start, end in zip(groups, starts, ends, strict=True)}


def _repeats(
    kgs: np.ndarray, hashes: np.ndarray, table: pa.Table, order: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Where, in ``order``, a row has the group and hash of the row before it, and whether
    it has its key too."""
    kgs, hashes = kgs[order], hashes[order]
    repeat = np.flatnonzero((kgs[1:] == kgs[:-1]) & (hashes[1:] == hashes[:-1]))
    fields = one_chunk(table[FIELD])
    same = pc.equal(fields.take(pa.array(order[repeat + 1])), fields.take(pa.array(order[repeat])))
    return repeat, np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool)


def _live_runs(runs: Sequence[Loaded | Run], until: int | None) -> list[Loaded]:
    """The live rows of each of ``runs`` (newest first) that has some: none that a newer
    run expired, and with ``until``, only timers at or before it."""
    found = []
    bound = _NEVER
    for item in runs:
        if isinstance(item, Loaded) and (until is None or item.run.may_hold_timers_until(until)):
            keep = item.timers > bound
            if until is not None:
                keep &= item.timers <= until
            if keep.all():
                found.append(item)
            elif keep.any():
                found.append(Loaded(item.run, item.table.filter(pa.array(keep)),
                                    item.hashes[keep], item.timers[keep]))
        if run_of(item).expire is not None:
            bound = max(bound, run_of(item).expire)  # type: ignore[type-var, assignment]
    return found


def _folded(table: pa.Table, first: np.ndarray, combine: Combine) -> pa.Table:
    """One row per entry, whose versions are the rows from one ``first`` to the next: its
    value the versions' values folded by ``combine``."""
    entry = np.cumsum(first) - 1
    out = table.filter(pa.array(first))
    several = np.bincount(entry, minlength=out.num_rows) > 1
    if not several.any():
        return out
    rows = np.flatnonzero(several[entry])
    which = (np.cumsum(several) - 1)[entry[rows]]
    folded = combine(one_chunk(table[VALUE]).take(pa.array(rows)), which)
    values = pc.replace_with_mask(one_chunk(out[VALUE]), pa.array(several),
                                  one_chunk(folded).cast(pa.string()))
    return out.set_column(out.schema.get_field_index(VALUE), VALUE, values)


def run_of(item: Loaded | Run) -> Run:
    """The run of a group's item, mapped or not."""
    return item.run if isinstance(item, Loaded) else item


def runs_to_merge(runs: Sequence[Run]) -> int:
    """How many of the newest runs to merge into one (0 or >= 2), size-tiered: the newest
    ``TIER`` runs merge once they are of one size (the largest holds at most ``SAME_SIZE``
    times the smallest's rows; a run of no entries fits any size), and the run that makes
    merges again with the runs before it while they are of one size with it; all of them
    past ``MAX_RUNS``."""
    if len(runs) > MAX_RUNS:
        return len(runs)
    stack = [(run.rows, 1) for run in runs]  # (rows, runs merged into it), newest last
    while len(stack) >= TIER:
        newest = stack[-TIER:]
        sizes = [rows for rows, _ in newest if rows]
        if sizes and max(sizes) > SAME_SIZE * min(sizes):
            break
        stack[-TIER:] = [(sum(rows for rows, _ in newest), sum(n for _, n in newest))]
    count = stack[-1][1] if stack else 0
    return count if count >= 2 else 0
