"""In-process state store for unit tests (not shared between processes)."""

from __future__ import annotations

import pyarrow as pa

from engine.runtime.state.base import GroupState, StateStore


class MemoryStateStore(StateStore):
    """Groups kept in a dict; same semantics as the real stores."""

    keyed_windows = True

    def __init__(self) -> None:
        self._groups: dict[tuple[str, int], GroupState] = {}

    def read_group(self, operator: str, key_group: int) -> GroupState | None:
        """The stored group, if any."""
        return self._groups.get((operator, key_group))

    def write_group(self, operator: str, key_group: int, epoch: int, table: pa.Table) -> int:
        """Replaces the group unless it already holds ``epoch`` or later."""
        old = self._groups.get((operator, key_group))
        if old is not None and old.epoch >= epoch:
            return 0
        self._groups[(operator, key_group)] = GroupState(epoch, table)
        return table.nbytes

    def delete_group(self, operator: str, key_group: int) -> None:
        """Forgets the group."""
        self._groups.pop((operator, key_group), None)

    def groups(self, operator: str) -> set[int]:
        """Key groups of the operator."""
        return {kg for (op, kg) in self._groups if op == operator}

    def clear(self) -> None:
        """Drops everything."""
        self._groups.clear()
