"""The keyed layout in the embedded SQLite store: one row per entry, keyed by
(operator, key group, timer, field), and one mark row per (operator, key group), in a
file of their own with 4 KiB pages (small rows: the whole groups' 64 KiB pages suit blobs).

An entry's primary key puts a group's timers in order, so the due timers are one range
scan and no separate timer index is kept; a key is one primary-key lookup. A commit is one
transaction for all the instance's groups (each skipped if its mark is already at the
epoch), so a group's entries, mark and emitted rows change together.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping

import pyarrow as pa

from engine.runtime.state import keyed
from engine.runtime.state.keyed import FIELD, TIMER, VALUE, KeyedChanges, KeyedEntries

KEYED_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS keyed_entries (
    operator TEXT NOT NULL, key_group INTEGER NOT NULL, timer INTEGER NOT NULL,
    field TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (operator, key_group, timer, field)
) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS keyed_marks (
    operator TEXT NOT NULL, key_group INTEGER NOT NULL, epoch INTEGER NOT NULL,
    emitted BLOB, PRIMARY KEY (operator, key_group)
) WITHOUT ROWID""",
)

_PUT = """
INSERT INTO keyed_entries (operator, key_group, timer, field, value) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (operator, key_group, timer, field) DO UPDATE SET value = excluded.value
"""
_FIRE = "DELETE FROM keyed_entries WHERE operator = ? AND key_group = ? AND timer = ?"
_MARK = """
INSERT INTO keyed_marks (operator, key_group, epoch, emitted) VALUES (?, ?, ?, ?)
ON CONFLICT (operator, key_group) DO UPDATE SET epoch = excluded.epoch, emitted = excluded.emitted
"""


class SqliteKeyedEntries(KeyedEntries):
    """The keyed operations of ``SqliteStateStore`` (which provides ``_db``)."""

    def _keyed_db(self) -> sqlite3.Connection:  # provided by the store
        raise NotImplementedError

    def marks(self, operator: str, key_groups: Iterable[int]) -> dict[int, int]:
        """Each group's mark, in one query."""
        wanted = json.dumps(sorted(set(key_groups)))
        rows = self._keyed_db().execute(
            "SELECT key_group, epoch FROM keyed_marks WHERE operator = ?"
            " AND key_group IN (SELECT value FROM json_each(?))",
            (operator, wanted),
        )
        return {int(kg): int(epoch) for kg, epoch in rows}

    def read_entries(self, operator: str, wanted: pa.Table) -> pa.Table:
        """One primary-key lookup per wanted entry, one query per (group, timer)."""
        if wanted.num_rows == 0:
            return keyed.no_entries()
        db = self._keyed_db()
        kgs, timers, fields, values = [], [], [], []
        for (kg, timer), names in keyed.by_group_and_timer(wanted).items():
            rows = db.execute(
                "SELECT field, value FROM keyed_entries WHERE operator = ? AND key_group = ?"
                " AND timer = ? AND field IN (SELECT value FROM json_each(?))",
                (operator, kg, timer, json.dumps(names)),
            ).fetchall()
            for field, value in rows:
                fields.append(field)
                values.append(value)
            kgs += [kg] * len(rows)
            timers += [timer] * len(rows)
        found = keyed.entries_table(kgs, timers, fields, values)
        self.bytes_read += found[FIELD].nbytes + found[VALUE].nbytes
        return found

    def fire_timers(self, operator: str, key_groups: Iterable[int], until: int) -> pa.Table:
        """The due entries: one range scan per group."""
        db = self._keyed_db()
        kgs, timers, fields, values = [], [], [], []
        for kg in sorted(set(key_groups)):
            for timer, field, value in db.execute(
                "SELECT timer, field, value FROM keyed_entries"
                " WHERE operator = ? AND key_group = ? AND timer <= ?",
                (operator, kg, until),
            ):
                kgs.append(kg)
                timers.append(timer)
                fields.append(field)
                values.append(value)
        found = keyed.entries_table(kgs, timers, fields, values)
        self.bytes_read += found[FIELD].nbytes + found[VALUE].nbytes
        return found

    def read_emitted(self, operator: str, key_groups: Iterable[int]) -> dict[int, pa.Table]:
        """The rows each group's last commit emitted."""
        rows = self._keyed_db().execute(
            "SELECT key_group, emitted FROM keyed_marks WHERE operator = ?"
            " AND key_group IN (SELECT value FROM json_each(?))",
            (operator, json.dumps(sorted(set(key_groups)))),
        )
        found = {}
        for kg, emitted in rows:
            if emitted:
                self.bytes_read += len(emitted)
                found[int(kg)] = keyed.ipc_table(emitted)
        return found

    def commit_entries(self, operator: str, epoch: int, changes: Mapping[int, KeyedChanges]) -> int:
        """All groups' changes and marks in one transaction."""
        if not changes:
            return 0
        db = self._keyed_db()
        written = 0
        db.execute("BEGIN IMMEDIATE")
        try:
            stored = self.marks(operator, changes)
            for kg, change in changes.items():
                if stored.get(kg, -1) < epoch:
                    written += _apply(db, operator, kg, epoch, change)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return written


def _apply(db: sqlite3.Connection, operator: str, kg: int, epoch: int, change: KeyedChanges) -> int:
    for timer in change.fired:
        db.execute(_FIRE, (operator, kg, timer))
    written = 0
    if change.puts is not None and change.puts.num_rows:
        puts = change.puts
        db.executemany(
            _PUT,
            zip(
                [operator] * puts.num_rows,
                [kg] * puts.num_rows,
                puts[TIMER].to_pylist(),
                puts[FIELD].to_pylist(),
                puts[VALUE].to_pylist(),
                strict=True,
            ),
        )
        written += puts[FIELD].nbytes + puts[VALUE].nbytes
    emitted = keyed.ipc_bytes(change.emitted) if change.emitted is not None else None
    db.execute(_MARK, (operator, kg, epoch, emitted))
    return written + (len(emitted) if emitted else 0)
