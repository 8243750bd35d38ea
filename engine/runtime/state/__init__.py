"""Shared keyed state stores addressed by (operator, key group, key), never by instance."""

from engine.runtime.state.base import KeyedChanges, StateStore, StoreSpec

__all__ = ["KeyedChanges", "StateStore", "StoreSpec", "open_store"]

_OPEN: dict[StoreSpec, StateStore] = {}


def open_store(spec: StoreSpec) -> StateStore:
    """The store for ``spec``; one instance per process so workers reuse connections."""
    store = _OPEN.get(spec)
    if store is None:
        store = _OPEN[spec] = _build(spec)
    return store


def _build(spec: StoreSpec) -> StateStore:
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
