"""The keyed layout the Redis store kept windows in before sorted runs (``redis_keyed.py``):
entries as hash fields, read and written by the Redis server one by one. Kept for the
operators whose state is already in it (a run started before the change goes on in it).

Per (operator, key group), all under one hash tag so a group's keys share a cluster slot:

- ``{<ns>:<op>:<kg>}:mark``: hash with the epoch of the last commit and its emitted rows;
- ``{<ns>:<op>:<kg>}:timers``: sorted set of the group's timers (the timer index);
- ``{<ns>:<op>:<kg>}:t:<timer>``: hash field -> value of the timer's entries.

Reads are ``HMGET`` of the input's fields and ``ZRANGEBYSCORE`` + ``HGETALL`` of the due
timers, pipelined; a commit is one Lua script per group (compare the mark, delete fired
timers, put the changed entries, set the mark), all groups of the instance in one round trip.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import redis

from engine.runtime.state import keyed
from engine.runtime.state.keyed import (
    FIELD,
    TIMER,
    VALUE,
    Combine,
    KeyedChanges,
    KeyedEntries,
    refuse_folding,
)

# KEYS: mark, timers, groups set. ARGV: epoch, emitted, kg, timer-hash prefix, number of
# fired timers, the fired timers, then per timer put: timer, n, n field/value pairs.
_COMMIT = """
local stored = redis.call('HGET', KEYS[1], 'epoch')
if stored and tonumber(stored) >= tonumber(ARGV[1]) then return 0 end
local i = 6
for _ = 1, tonumber(ARGV[5]) do
  redis.call('DEL', ARGV[4] .. ARGV[i])
  redis.call('ZREM', KEYS[2], ARGV[i])
  i = i + 1
end
while i <= #ARGV do
  local timer, last = ARGV[i], i + 1 + 2 * tonumber(ARGV[i + 1])
  i = i + 2
  while i <= last do
    local stop = math.min(i + 999, last)
    redis.call('HSET', ARGV[4] .. timer, unpack(ARGV, i, stop))
    i = stop + 1
  end
  redis.call('ZADD', KEYS[2], timer, timer)
end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'emitted', ARGV[2])
redis.call('SADD', KEYS[3], ARGV[3])
return 1
"""


class RedisEntriesLayout(KeyedEntries):
    """The entries layout's operations, for ``RedisStateStore`` (which sets ``_redis`` and
    ``_ns``)."""

    _redis: redis.Redis
    _ns: str
    _commit: Any = None

    def _tag(self, operator: str, kg: int) -> str:
        return f"{{{self._ns}:{operator}:{kg}}}"

    def keyed_groups_key(self, operator: str) -> str:
        """The set of the operator's groups with keyed state."""
        return entries_groups_key(self._ns, operator)

    def marks(self, operator: str, key_groups: Iterable[int]) -> dict[int, int]:
        """Each group's mark, in one round trip."""
        wanted = sorted(set(key_groups))
        pipe = self._redis.pipeline(transaction=False)
        for kg in wanted:
            pipe.hget(self._tag(operator, kg) + ":mark", "epoch")
        replies: list[Any] = pipe.execute() if wanted else []
        return {kg: int(e) for kg, e in zip(wanted, replies, strict=True) if e is not None}

    def read_entries(self, operator: str, wanted: pa.Table) -> pa.Table:
        """``HMGET`` of each (group, timer)'s wanted fields, in one round trip."""
        if wanted.num_rows == 0:
            return keyed.FOUND.empty_table()
        asked = keyed.by_group_and_timer(wanted)
        pipe = self._redis.pipeline(transaction=False)
        for (kg, timer), names in asked.items():
            pipe.hmget(f"{self._tag(operator, kg)}:t:{timer}", names)
        kgs, timers, fields, values = [], [], [], []
        for ((kg, timer), names), found in zip(asked.items(), pipe.execute(), strict=True):
            for name, value in zip(names, found, strict=True):
                if value is not None:
                    kgs.append(kg)
                    timers.append(timer)
                    fields.append(name)
                    values.append(value)
        found = keyed.entries_table(kgs, timers, fields, values)
        return self._counted(keyed.found_among(wanted, found))

    def fire_timers(
        self, operator: str, key_groups: Iterable[int], until: int, combine: Combine | None = None
    ) -> pa.Table:
        """The due timers from each group's index, then their entries."""
        refuse_folding(self, operator, combine)
        groups = sorted(set(key_groups))
        pipe = self._redis.pipeline(transaction=False)
        for kg in groups:
            pipe.zrangebyscore(self._tag(operator, kg) + ":timers", "-inf", until)
        due = [(kg, int(t)) for kg, ts in zip(groups, pipe.execute(), strict=True) for t in ts]
        if not due:
            return keyed.no_entries()
        for kg, timer in due:
            pipe.hgetall(f"{self._tag(operator, kg)}:t:{timer}")
        kgs, timers, fields, values = [], [], [], []
        for (kg, timer), entries in zip(due, pipe.execute(), strict=True):
            kgs += [kg] * len(entries)
            timers += [timer] * len(entries)
            fields += list(entries)
            values += list(entries.values())
        return self._counted(keyed.entries_table(kgs, timers, fields, values))

    def read_emitted(self, operator: str, key_groups: Iterable[int]) -> dict[int, pa.Table]:
        """The rows each group's last commit emitted."""
        found, size = emitted_rows(
            self._redis, {kg: self._tag(operator, kg) + ":mark" for kg in set(key_groups)})
        self.bytes_read += size
        return found

    def commit_entries(
        self,
        operator: str,
        epoch: int,
        changes: Mapping[int, KeyedChanges],
        combine: Combine | None = None,
    ) -> int:
        """One script per group, all in one round trip and one transaction (one sync of the
        append-only file, see ``redis_keyed``); returns the bytes applied."""
        refuse_folding(self, operator, combine)
        if self._commit is None:
            self._commit = self._redis.register_script(_COMMIT)
        pipe = self._redis.pipeline(transaction=True)
        sizes = []
        for kg, change in changes.items():
            args, size = _commit_args(epoch, kg, f"{self._tag(operator, kg)}:t:", change)
            keys = [
                self._tag(operator, kg) + ":mark",
                self._tag(operator, kg) + ":timers",
                self.keyed_groups_key(operator),
            ]
            self._commit(keys=keys, args=args, client=pipe)
            sizes.append(size)
        applied = pipe.execute() if changes else []
        return sum(size for size, done in zip(sizes, applied, strict=True) if done)

    def _counted(self, found: pa.Table) -> pa.Table:
        self.bytes_read += found[FIELD].nbytes + found[VALUE].nbytes
        return found


def entries_groups_key(namespace: str, operator: str) -> str:
    """The set of the operator's groups whose state is in this layout."""
    return f"{namespace}:keyed:{operator}"


def emitted_rows(client: redis.Redis, keys: Mapping[int, str]) -> tuple[dict[int, pa.Table], int]:
    """The rows each group's last commit emitted (the ``emitted`` field of each group's hash
    at ``keys[kg]``), in one round trip, and the bytes read."""
    groups = sorted(keys)
    pipe = client.pipeline(transaction=False)
    for kg in groups:
        pipe.hget(keys[kg], "emitted")
    found, size = {}, 0
    for kg, data in zip(groups, pipe.execute() if groups else [], strict=True):
        if data:
            size += len(data)
            found[kg] = keyed.ipc_table(data)
    return found, size


def _commit_args(epoch: int, kg: int, prefix: str, change: KeyedChanges) -> tuple[list[Any], int]:
    emitted = keyed.ipc_bytes(change.emitted) if change.emitted is not None else b""
    args: list[Any] = [epoch, emitted, kg, prefix, len(change.fired), *change.fired]
    size = len(emitted)
    puts = change.puts
    if puts is not None and puts.num_rows:
        puts = puts.sort_by(TIMER)
        timers = puts[TIMER].to_pylist()
        fields, values = puts[FIELD].to_pylist(), puts[VALUE].to_pylist()
        start = 0
        while start < len(timers):
            end = start
            while end < len(timers) and timers[end] == timers[start]:
                end += 1
            pairs = [
                x for pair in zip(fields[start:end], values[start:end], strict=True) for x in pair
            ]
            args += [timers[start], end - start, *pairs]
            start = end
        size += puts[FIELD].nbytes + puts[VALUE].nbytes
    return args, size
