"""Embedded state store: one SQLite database (WAL mode) per run, rows keyed by
(operator, key group).

Shared by every Spark Python worker on the machine without a server. Each write is one
transaction that replaces a key group's Arrow table only if it carries a newer epoch, so a
replayed epoch is skipped atomically. WAL lets readers go on while one instance commits;
writers wait for each other briefly (an instance commits its key groups of an epoch in one
transaction). Compared with one file per key group, a write costs a WAL append instead of
creating and renaming a file; 64 KiB pages keep a group's blob in few overflow pages.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Mapping

import pyarrow as pa

from engine.runtime.state.base import GroupState, StateStore, table_from_bytes, table_to_bytes
from engine.runtime.state.sqlite_keyed import KEYED_SCHEMA, SqliteKeyedEntries

_SCHEMA = """
CREATE TABLE IF NOT EXISTS key_group_state (
    operator TEXT NOT NULL,
    key_group INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (operator, key_group)
) WITHOUT ROWID
"""

_WRITE = """
INSERT INTO key_group_state (operator, key_group, epoch, data) VALUES (?, ?, ?, ?)
ON CONFLICT (operator, key_group) DO UPDATE SET epoch = excluded.epoch, data = excluded.data
WHERE excluded.epoch > key_group_state.epoch
"""

_DELETE = "DELETE FROM key_group_state WHERE operator = ? AND key_group = ?"
_BUSY_S = 60.0


def _set_up(
    connection: sqlite3.Connection, page_size: int = 65536, schema: tuple[str, ...] = (_SCHEMA,)
) -> None:
    """WAL mode, 64 KiB pages and the table, on a file other workers may be setting up
    or writing at the same moment: a journal-mode change is refused at once ("database is
    locked", without waiting for the busy timeout) while another connection holds a lock,
    so it is retried; once the file is in WAL mode nothing here needs a lock."""
    deadline = time.monotonic() + _BUSY_S
    while True:
        try:
            if connection.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                connection.execute(f"PRAGMA page_size={page_size}")  # a new file only
                connection.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a process killed at any point loses nothing committed.
            connection.execute("PRAGMA synchronous=NORMAL")
            for statement in schema:
                connection.execute(statement)
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class SqliteStateStore(SqliteKeyedEntries, StateStore):
    """Key groups as rows of ``<root>/<namespace>.sqlite`` (keyed entries as sorted runs
    under ``<root>/<namespace>.runs``, ``sqlite_keyed.py``)."""

    keyed_windows = True

    def __init__(self, root: str, namespace: str) -> None:
        self.path = os.path.join(root, f"{namespace}.sqlite")
        self.keyed_path = os.path.join(root, f"{namespace}.keyed.sqlite")
        self.runs_root = os.path.join(root, f"{namespace}.runs")
        self._connection: sqlite3.Connection | None = None
        self._keyed: sqlite3.Connection | None = None
        self._pid = self._keyed_pid = 0

    def _db(self) -> sqlite3.Connection:
        # A connection must not cross a fork (Spark forks its Python workers).
        if self._connection is None or self._pid != os.getpid():
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            connection = sqlite3.connect(self.path, timeout=_BUSY_S, isolation_level=None)
            _set_up(connection)
            self._connection, self._pid = connection, os.getpid()
        return self._connection

    def _keyed_db(self) -> sqlite3.Connection:
        if self._keyed is None or self._keyed_pid != os.getpid():
            os.makedirs(os.path.dirname(self.keyed_path), exist_ok=True)
            connection = sqlite3.connect(self.keyed_path, timeout=_BUSY_S, isolation_level=None)
            _set_up(connection, 4096, KEYED_SCHEMA)
            self._keyed, self._keyed_pid = connection, os.getpid()
        return self._keyed

    def read_group(self, operator: str, key_group: int) -> GroupState | None:
        """The group's table and epoch, or None."""
        row = self._db().execute(
            "SELECT data FROM key_group_state WHERE operator = ? AND key_group = ?",
            (operator, key_group),
        ).fetchone()
        return None if row is None else table_from_bytes(row[0])

    def read_groups(self, operator: str, key_groups: Iterable[int]) -> dict[int, GroupState]:
        """The groups among ``key_groups`` that hold state, in one query."""
        wanted = sorted(set(key_groups))
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        rows = self._db().execute(
            "SELECT key_group, data FROM key_group_state"
            f" WHERE operator = ? AND key_group IN ({marks})",
            (operator, *wanted),
        )
        return {int(kg): table_from_bytes(data) for kg, data in rows}

    def write_group(self, operator: str, key_group: int, epoch: int, table: pa.Table) -> int:
        """Replaces the group in one transaction unless it holds ``epoch`` or later."""
        return self.write_groups(operator, epoch, {key_group: table})

    def write_groups(
        self, operator: str, epoch: int, changes: Mapping[int, pa.Table | None]
    ) -> int:
        """Every change in one transaction: all of them are applied, or none."""
        encoded = {
            kg: None if table is None else table_to_bytes(table, epoch)
            for kg, table in changes.items()
        }
        db = self._db()
        written = 0
        db.execute("BEGIN IMMEDIATE")
        try:
            for kg, data in encoded.items():
                if data is None:
                    db.execute(_DELETE, (operator, kg))
                elif db.execute(_WRITE, (operator, kg, epoch, data)).rowcount:
                    written += len(data)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return written

    def holds_whole_groups(self, operator: str) -> bool:
        """Whether any whole group of ``operator`` is stored (one indexed probe)."""
        row = self._db().execute(
            "SELECT 1 FROM key_group_state WHERE operator = ? LIMIT 1", (operator,)
        ).fetchone()
        return row is not None

    def delete_group(self, operator: str, key_group: int) -> None:
        """Removes the group's row if present."""
        self._db().execute(_DELETE, (operator, key_group))

    def groups(self, operator: str) -> set[int]:
        """Key groups of ``operator`` that hold state."""
        rows = self._db().execute(
            "SELECT key_group FROM key_group_state WHERE operator = ?", (operator,)
        )
        return {int(kg) for (kg,) in rows} | self.keyed_groups(operator)

    def clear(self) -> None:
        """Deletes every group of this namespace."""
        self._db().execute("DELETE FROM key_group_state")
        self.clear_keyed()

    def state_bytes(self, operator: str) -> int:
        """Sum of the operator's serialised group sizes and keyed run files."""
        whole = self._db().execute(
            "SELECT COALESCE(SUM(LENGTH(data)), 0) FROM key_group_state WHERE operator = ?",
            (operator,),
        ).fetchone()
        return int(whole[0]) + self.keyed_bytes(operator)
