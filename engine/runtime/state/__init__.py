"""Shared keyed state stores addressed by (operator, key group), never by instance."""

from engine.runtime.state.base import GroupState, StateStore, StoreSpec, open_store

__all__ = ["GroupState", "StateStore", "StoreSpec", "open_store"]
