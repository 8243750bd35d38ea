"""Shared keyed state stores addressed by (operator, key group, key), never by instance."""

from engine.runtime.state.base import KeyedChanges, StateSize, StateStore, StoreSpec

__all__ = ["KeyedChanges", "StateSize", "StateStore", "StoreSpec", "build_store", "open_store"]

_OPEN: dict[StoreSpec, StateStore] = {}


def open_store(spec: StoreSpec) -> StateStore:
    """The store for ``spec``; one instance per process so workers reuse connections."""
    store = _OPEN.get(spec)
    if store is None:
        store = _OPEN[spec] = build_store(spec)
    return store


def build_store(spec: StoreSpec) -> StateStore:
    """A store of its own for ``spec``, not kept for the process: for a look at a run's
    store from outside the run (its size, a discard), closed when dropped."""
    # Imported here: a worker loads only the store it opens (Redis's client or SQLite).
    if spec.kind == "sqlite":
        from engine.runtime.state.sqlite_store import SqliteStateStore

        return SqliteStateStore(spec.location, spec.namespace)
    if spec.kind == "redis":
        from engine.runtime.state.redis_store import RedisStateStore

        return RedisStateStore(spec.location, spec.namespace)
    if spec.kind == "memory":
        from engine.runtime.state.memory import MemoryStateStore

        return MemoryStateStore()
    raise ValueError(f"unknown state store kind {spec.kind!r}")
