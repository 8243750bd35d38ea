"""The Redis store, for clusters: each key group's sorted runs held in Redis and mapped
from a local cache of their files; writes on the server's disk before a commit returns
(``redis_durability``). Per (operator, key group), under one hash tag (one cluster slot):
``{<ns>:<op>:<kg>}:g``, a hash of the mark (``epoch``), the rows the last commit emitted
and the list of runs; ``{<ns>:<op>:<kg>}:r:<file>.<batch>``, one run, packed (``_stored``).

A run never changes and its name is unique, so an instance keeps each run it reads or
writes in a local cache (``runs_cache``) and maps it: an epoch asks Redis for the groups'
rows and for runs it has not seen (a group it took over), so what it costs Redis follows its
input, not the state's size. A commit is one Lua script per group (compare the mark and the
list read, put the new runs, delete those merged away, set the row), all the instance's
groups in one transaction: one sync of Redis's append-only file (one Redis, not a Cluster).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import redis

from engine.runtime.errors import StreamRuntimeError
from engine.runtime.state.base import (
    FIELD,
    TIMER,
    VALUE,
    StateSize,
    ipc_bytes,
    ipc_table,
)
from engine.runtime.state.redis_durability import durability_of, wait_durable
from engine.runtime.state.runs_store import (
    NEW,
    GroupRow,
    Plan,
    RunsStore,
    runs_from_json,
    runs_json,
)
from engine.runtime.state.sorted_runs import (
    RUN_SCHEMA,
    Loaded,
    MappedFiles,
    Run,
    entry_hashes,
    one_chunk,
    run_file_name,
    write_runs,
)

# KEYS: the group's row, the operator's set of groups, the new runs' keys, then the keys of
# the runs merged away. ARGV: epoch, emitted, kg, the new list of runs, the list the commit
# read (empty if none), the number of new runs, their bytes. 0: the mark is at the epoch
# already (a replay), -1: the group changed since the commit read it.
_COMMIT = """
local stored = redis.call('HMGET', KEYS[1], 'epoch', 'runs')
if stored[1] and tonumber(stored[1]) >= tonumber(ARGV[1]) then return 0 end
if (stored[2] or '') ~= ARGV[5] then return -1 end
local new = tonumber(ARGV[6])
for i = 1, new do redis.call('SET', KEYS[2 + i], ARGV[6 + i]) end
for i = 3 + new, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'emitted', ARGV[2], 'runs', ARGV[4])
redis.call('SADD', KEYS[2], ARGV[3])
return 1
"""
# A run as Redis holds it, without its hashes: a header (``_PACKED``, the rows, the string
# columns' bytes, the packed size), then the timers and each string column's lengths and
# bytes, compressed whole with zstd. Redis syncs every write, so bytes count: zstd does
# little with the IPC format's running offsets. The cache keeps plain IPC files.
_STORED = pa.schema([RUN_SCHEMA.field(name) for name in (TIMER, FIELD, VALUE)])
_PACKED = b"SRP1"
_HEADER = struct.Struct("<4sQQQQ")
_CODEC = pa.Codec("zstd", compression_level=1)
# Run files this process has mapped from its cache.
_MAPPED = MappedFiles()


def runs_cache(url: str, namespace: str) -> str:
    """The local folder of a store's cached runs: ``STREAMSCALE_RUNS_CACHE`` (one per
    machine, shared by its workers), else one in the temporary folder."""
    root = os.environ.get("STREAMSCALE_RUNS_CACHE") or os.path.join(
        tempfile.gettempdir(), "streamscale-runs")
    store = hashlib.sha1(f"{url}\0{namespace}".encode()).hexdigest()[:16]
    return os.path.join(root, store)


class RedisStateStore(RunsStore):
    """Groups under ``{<namespace>:<operator>:<kg>}``, a set of groups per operator, runs
    cached under ``cache_root``."""

    def __init__(self, url: str, namespace: str) -> None:
        self._redis = redis.Redis.from_url(url)
        self._ns = namespace
        self.cache_root = runs_cache(url, namespace)
        self._runs_commit = self._redis.register_script(_COMMIT)
        self._durability = durability_of(self._redis)

    def _tag(self, operator: str, kg: int) -> str:
        return f"{{{self._ns}:{operator}:{kg}}}"

    def groups_key(self, operator: str) -> str:
        """The set of the operator's groups that hold state."""
        return f"{self._ns}:runs:{operator}"

    def groups(self, operator: str) -> set[int]:
        """Members of the operator's group set."""
        members: Any = self._redis.smembers(self.groups_key(operator))
        return {int(m) for m in members}

    def read_emitted(self, operator: str, key_groups: Iterable[int]) -> dict[int, pa.Table]:
        """The rows each group's last commit emitted, in one round trip."""
        found = {}
        for kg, (data,) in self._group_fields(operator, key_groups, "emitted").items():
            if data:
                self.bytes_read += len(data)
                found[kg] = ipc_table(data)
        return found

    def size(self) -> StateSize:
        """The memory Redis gives the namespace's keys, and the entries and groups the
        groups' rows list (scanned by prefix, a page at a time)."""
        keys = self._keys()
        used = entries = groups = 0
        for start in range(0, len(keys), 1000):
            page = keys[start:start + 1000]
            pipe = self._redis.pipeline(transaction=False)
            for key in page:
                pipe.memory_usage(key, samples=0)
                pipe.hget(key, "runs") if key.endswith(b":g") else pipe.echo("")
            answers = pipe.execute()
            for usage, runs in zip(answers[::2], answers[1::2], strict=True):
                used += int(usage or 0)
                rows = sum(run.rows for run in runs_from_json(runs)) if runs else 0
                entries, groups = entries + rows, groups + (rows > 0)
        return StateSize(used, entries, groups)

    def clear(self) -> None:
        """Deletes every key of the namespace and the cache."""
        for key in self._keys():
            self._redis.delete(key)
        shutil.rmtree(self.cache_root, ignore_errors=True)
        _MAPPED.forget(self.cache_root)

    def _keys(self) -> list[Any]:
        """Every key of the namespace (only ours: scanned by prefix, a page at a time)."""
        return [key for pattern in (f"{self._ns}:*", f"{{{self._ns}:*")
                for key in self._redis.scan_iter(match=pattern, count=1000)]

    def _commit(self, operator: str, epoch: int, plan: Plan) -> int:
        """Each group's new runs and row in one script per group, all in one round trip,
        durable before it returns. The new runs are cached first, in one file as the
        embedded store writes them: the next epoch maps them without asking Redis."""
        name = run_file_name(epoch)
        before, live, runs, tables = plan.before, plan.live, plan.runs, plan.tables
        if tables:
            path = os.path.join(self._cache_dir(operator), name)
            write_runs(_part(path), tables)
            os.replace(_part(path), path)
        blobs = [_stored(table) for table in tables]
        # One transaction (MULTI/EXEC): Redis runs the scripts in one go, writes them to its
        # append-only file once and syncs it once; a plain pipeline is read in pieces, and
        # a store's Redis syncs after each piece that wrote (``appendfsync always``).
        pipe = self._redis.pipeline(transaction=True)
        sizes = []
        for kg, change in live.items():
            new = [r.batch for r in runs[kg] if r.file == NEW]
            listed = plan.listed(kg, name)
            row = before.get(kg)
            dropped = [r for r in (row.runs if row else ()) if r.file and r not in listed]
            emitted = ipc_bytes(change.emitted) if change.emitted is not None else b""
            keys = [self._tag(operator, kg) + ":g", self.groups_key(operator),
                    *[self._run_key(operator, kg, name, i) for i in new],
                    *[self._run_key(operator, kg, r.file, r.batch) for r in dropped if r.file]]
            read = row.text if row else ""
            args: list[Any] = [epoch, emitted, kg, runs_json(listed), read, len(new),
                               *[blobs[i] for i in new]]
            self._runs_commit(keys=keys, args=args, client=pipe)
            sizes.append(len(emitted) + sum(len(blobs[i]) for i in new))
        applied = pipe.execute()
        wait_durable(self._redis, self._durability)
        for kg, done in zip(live, applied, strict=True):
            if done == -1:
                raise StreamRuntimeError(
                    f"key group {kg} of {operator!r} changed under the commit of epoch {epoch}")
        self._collect_cache(operator, epoch)
        return sum(size for size, done in zip(sizes, applied, strict=True) if done == 1)

    def _rows(self, operator: str, key_groups: Iterable[int]) -> dict[int, GroupRow]:
        rows = {}
        for kg, (epoch, text) in self._group_fields(operator, key_groups, "epoch", "runs").items():
            if epoch is not None:
                text = text.decode() if text else "[]"
                rows[kg] = GroupRow(int(epoch), runs_from_json(text), text)
        return rows

    def _open(self, operator: str, rows: Mapping[int, GroupRow]) -> dict[int, list[Loaded | Run]]:
        """The groups' runs mapped from the cache, the runs it lacks fetched from Redis
        first (all in one round trip)."""
        missing = []
        for kg, row in rows.items():
            for run in row.runs:
                path = self._cached(operator, run)[0] if run.file else None
                if path is not None and path not in _MAPPED and not os.path.exists(path):
                    missing.append((kg, run, path))
        if missing:
            self._fetch(operator, missing)
        return super()._open(operator, rows)

    def _loaded(self, operator: str, run: Run) -> Loaded:
        path, alone = self._cached(operator, run)
        return _MAPPED.file(path).loaded(run, alone)

    def _cached(self, operator: str, run: Run) -> tuple[str, bool]:
        """Where the cache keeps a run: the file of the commit that wrote it, if this machine
        made it, else a file of the run alone (fetched by ``_open``), and which of them."""
        whole = os.path.join(self.cache_root, operator.encode().hex(), str(run.file))
        if whole in _MAPPED or os.path.exists(whole):
            return whole, False
        return f"{whole}.{run.batch}", True

    def _group_fields(self, operator: str, key_groups: Iterable[int],
                      *names: str) -> dict[int, list[Any]]:
        """The fields ``names`` of each group's row, in one round trip."""
        groups = sorted(set(key_groups))
        pipe = self._redis.pipeline(transaction=False)
        for kg in groups:
            pipe.hmget(self._tag(operator, kg) + ":g", list(names))
        return dict(zip(groups, pipe.execute() if groups else [], strict=True))

    def _fetch(self, operator: str, missing: list[tuple[int, Run, str]]) -> None:
        """Fetches runs into the cache, each as a file of its own."""
        self._cache_dir(operator)
        pipe = self._redis.pipeline(transaction=False)
        for kg, run, _ in missing:
            pipe.get(self._run_key(operator, kg, str(run.file), run.batch))
        for (kg, run, path), data in zip(missing, pipe.execute(), strict=True):
            if data is None:
                raise StreamRuntimeError(
                    f"run {run.file}.{run.batch} of key group {kg} of {operator!r} is missing "
                    "from the state store (was the state cleared under the run?)")
            self.bytes_read += len(data)
            write_runs(_part(path), [_run_table(data)])
            os.replace(_part(path), path)

    def _collect_cache(self, operator: str, epoch: int) -> None:
        """Deletes the operator's cached files no group names (``MappedFiles.collect``)."""
        members: Any = self._redis.smembers(self.groups_key(operator))
        named = {run.file for row in self._rows(operator, map(int, members)).values()
                 for run in row.runs}
        _MAPPED.collect(self._cache_dir(operator), named, epoch)

    def _run_key(self, operator: str, kg: int, name: str, batch: int) -> str:
        return f"{self._tag(operator, kg)}:r:{name}.{batch}"

    def _cache_dir(self, operator: str) -> str:
        directory = os.path.join(self.cache_root, operator.encode().hex())
        os.makedirs(directory, exist_ok=True)
        return directory


def _stored(table: pa.Table) -> bytes:
    """A run's bytes as Redis holds them (``_PACKED``)."""
    timers = one_chunk(table[TIMER]).cast(pa.int64()).to_numpy(zero_copy_only=False)
    strings = [_lengths_and_bytes(one_chunk(table[name]), name) for name in (FIELD, VALUE)]
    body = b"".join(
        [timers.tobytes(), *(part for lengths, data in strings for part in (lengths, data))])
    header = _HEADER.pack(_PACKED, table.num_rows, len(strings[0][1]), len(strings[1][1]),
                          len(body))
    return header + _CODEC.compress(body, asbytes=True)


def _lengths_and_bytes(column: pa.Array, name: str) -> tuple[bytes, memoryview]:
    """A string column's lengths (int32) and its bytes, end to end (a view: a commit's runs
    are slices of one table, whose whole data buffer each of them shares)."""
    if column.null_count:
        raise StreamRuntimeError(f"a run's {name} column holds nulls, which runs never do")
    column = column.cast(pa.string())
    offsets = np.frombuffer(column.buffers()[1], np.int32)[
        column.offset : column.offset + len(column) + 1]
    data = column.buffers()[2]
    text = memoryview(b"" if data is None else data)[offsets[0] : offsets[-1]]
    return np.diff(offsets).astype(np.int32).tobytes(), text


def _unpacked(data: bytes) -> pa.Table:
    """The ``TIMER``, ``FIELD``, ``VALUE`` table of a run's ``_PACKED`` bytes."""
    _, rows, field_bytes, value_bytes, size = _HEADER.unpack_from(data)
    body = _CODEC.decompress(memoryview(data)[_HEADER.size :], decompressed_size=size)
    at = 8 * rows
    timers = pa.Array.from_buffers(pa.int64(), rows, [None, body.slice(0, at)])
    columns = []
    for length in (field_bytes, value_bytes):
        lengths = np.frombuffer(body, np.int32, rows, at)
        offsets = np.zeros(rows + 1, np.int32)
        np.cumsum(lengths, out=offsets[1:])
        text = body.slice(at + 4 * rows, length)
        columns.append(pa.StringArray.from_buffers(rows, pa.py_buffer(offsets), text))
        at += 4 * rows + length
    return pa.Table.from_arrays([timers, *columns], schema=_STORED)


def _run_table(data: bytes) -> pa.Table:
    """A run from its bytes in Redis, its hashes computed again (in the order it is sorted
    by)."""
    stored = _unpacked(data)
    hashes = pa.array(entry_hashes(stored[FIELD]), pa.uint64())
    return pa.Table.from_arrays([hashes, *stored.columns], schema=RUN_SCHEMA)


def _part(path: str) -> str:
    """Where a file is written before it is renamed into place (whole or not at all)."""
    return f"{path}.{os.getpid()}.part"

