"""Networked state store on Redis for clusters: one hash per (operator, key group).

A Lua script compares the stored epoch with the writer's and replaces the state in one
atomic step, so a replayed epoch never applies twice even across machines. Writes are on the
server's disk before a write call returns (see ``redis_durability``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import redis

from engine.runtime.state.base import GroupState, StateStore, table_from_bytes, table_to_bytes
from engine.runtime.state.keyed import Combine, KeyedChanges
from engine.runtime.state.redis_durability import durability_of, wait_durable
from engine.runtime.state.redis_keyed import RedisKeyedEntries, runs_cache

_WRITE = """
local stored = redis.call('HGET', KEYS[1], 'epoch')
if stored and tonumber(stored) >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'data', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
return 1
"""


class RedisStateStore(RedisKeyedEntries, StateStore):
    """Keys ``<namespace>:state:<operator>:<kg>`` plus a set of groups per operator (keyed
    entries as sorted runs under their own keys, ``redis_keyed.py``)."""

    keyed_windows = True

    def __init__(self, url: str, namespace: str) -> None:
        self._redis = redis.Redis.from_url(url)
        self._ns = namespace
        self.cache_root = runs_cache(url, namespace)
        self._entries_layout = {}
        self._write = self._redis.register_script(_WRITE)
        self._durability = durability_of(self._redis)

    def _key(self, operator: str, key_group: int) -> str:
        return f"{self._ns}:state:{operator}:{key_group}"

    def _groups_key(self, operator: str) -> str:
        return f"{self._ns}:groups:{operator}"

    def read_group(self, operator: str, key_group: int) -> GroupState | None:
        """The group's table decoded from Arrow IPC."""
        data: Any = self._redis.hget(self._key(operator, key_group), "data")
        return None if data is None else table_from_bytes(data)

    def write_group(self, operator: str, key_group: int, epoch: int, table: pa.Table) -> int:
        """Atomic compare-epoch-and-set through the Lua script."""
        data = table_to_bytes(table, epoch)
        keys = [self._key(operator, key_group), self._groups_key(operator)]
        done = self._write(keys=keys, args=[epoch, data, key_group])
        wait_durable(self._redis, self._durability)
        return len(data) if done else 0

    def read_groups(self, operator: str, key_groups: Iterable[int]) -> dict[int, GroupState]:
        """The groups among ``key_groups`` that hold state, in one round trip."""
        wanted = sorted(set(key_groups))
        pipe = self._redis.pipeline(transaction=False)
        for kg in wanted:
            pipe.hget(self._key(operator, kg), "data")
        found: list[Any] = pipe.execute() if wanted else []
        return {
            kg: table_from_bytes(data)
            for kg, data in zip(wanted, found, strict=True)
            if data is not None
        }

    def write_groups(
        self, operator: str, epoch: int, changes: Mapping[int, pa.Table | None]
    ) -> int:
        """Every change in one round trip; each write stays an atomic compare-and-set."""
        writes = {
            kg: table_to_bytes(table, epoch) for kg, table in changes.items() if table is not None
        }
        # One MULTI/EXEC: the server appends it to its append-only file in one go, so a
        # Redis that fsyncs every write pays one fsync per call, not one per read buffer.
        pipe = self._redis.pipeline(transaction=True)
        for kg, data in writes.items():  # queued first: their replies come first
            keys = [self._key(operator, kg), self._groups_key(operator)]
            self._write(keys=keys, args=[epoch, data, kg], client=pipe)
        for kg in (kg for kg, table in changes.items() if table is None):
            pipe.delete(self._key(operator, kg))
            pipe.srem(self._groups_key(operator), kg)
        replies = pipe.execute() if changes else []
        wait_durable(self._redis, self._durability)
        applied = replies[: len(writes)]
        return sum(len(data) for data, done in zip(writes.values(), applied, strict=True) if done)

    def commit_entries(
        self,
        operator: str,
        epoch: int,
        changes: Mapping[int, KeyedChanges],
        combine: Combine | None = None,
    ) -> int:
        """The keyed layout's commit, durable before it returns (as every state write)."""
        applied = super().commit_entries(operator, epoch, changes, combine)
        wait_durable(self._redis, self._durability)
        return applied

    def delete_group(self, operator: str, key_group: int) -> None:
        """Deletes the hash and its set entry in one transaction."""
        pipe = self._redis.pipeline()
        pipe.delete(self._key(operator, key_group))
        pipe.srem(self._groups_key(operator), key_group)
        pipe.execute()
        wait_durable(self._redis, self._durability)

    def groups(self, operator: str) -> set[int]:
        """Members of the operator's group set."""
        members: Any = self._redis.smembers(self._groups_key(operator))
        return {int(m) for m in members} | self.keyed_groups(operator)

    def clear(self) -> None:
        """Deletes every key of the namespace (only ours: scanned by prefix)."""
        for pattern in (f"{self._ns}:*", f"{{{self._ns}:*"):
            for key in self._redis.scan_iter(match=pattern, count=1000):
                self._redis.delete(key)
        self._entries_layout.clear()
        self.clear_cache()

