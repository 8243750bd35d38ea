"""The embedded store, shared by every Spark Python worker on the machine without a server:
each key group's entries as sorted runs (``sorted_runs.py``) in immutable Arrow files under
``<namespace>.runs/<operator>/``, and one row per (operator, key group) in SQLite (WAL mode)
with the group's mark (the epoch), the rows it emitted and its list of runs.

A commit writes one file holding every new run of the instance's groups end to end, then
swaps the groups' rows in one transaction, each skipped if its mark is already at the
epoch: until then the file is named by no row, so a crash at any point leaves the last
committed lists, and a replay writes a file of its own."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterable, Mapping

import pyarrow as pa

from engine.runtime.errors import StreamRuntimeError
from engine.runtime.state.base import StateSize, ipc_bytes, ipc_table
from engine.runtime.state.runs_store import (
    GroupRow,
    Plan,
    RunsStore,
    runs_from_json,
    runs_json,
)
from engine.runtime.state.sorted_runs import Loaded, MappedFiles, Run, run_file_name, write_runs

_SCHEMA = """CREATE TABLE IF NOT EXISTS keyed_groups (
    operator TEXT NOT NULL, key_group INTEGER NOT NULL, epoch INTEGER NOT NULL,
    emitted BLOB, runs TEXT NOT NULL, PRIMARY KEY (operator, key_group)
) WITHOUT ROWID"""

_SAVE = """
INSERT INTO keyed_groups (operator, key_group, epoch, emitted, runs) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (operator, key_group) DO UPDATE SET epoch = excluded.epoch,
    emitted = excluded.emitted, runs = excluded.runs
"""
_BUSY_S = 60.0


def _set_up(connection: sqlite3.Connection) -> None:
    """WAL mode and the table, on a file other workers may be setting up or writing: a
    journal-mode change is refused at once while another connection holds a lock (no busy
    timeout), so it is retried; once the file is in WAL mode nothing here needs a lock."""
    deadline = time.monotonic() + _BUSY_S
    while True:
        try:
            if connection.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                connection.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a process killed at any point loses nothing committed.
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(_SCHEMA)
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


# Run files this process has mapped, by path (``_loaded``). A commit unmaps those another
# process deleted, so that their disk space does not stay taken while mapped here.
_MAPPED = MappedFiles()


class SqliteStateStore(RunsStore):
    """Group rows in ``<root>/<namespace>.keyed.sqlite``, runs under
    ``<root>/<namespace>.runs``."""

    def __init__(self, root: str, namespace: str) -> None:
        self.keyed_path = os.path.join(root, f"{namespace}.keyed.sqlite")
        self.runs_root = os.path.join(root, f"{namespace}.runs")
        self._keyed: sqlite3.Connection | None = None
        self._keyed_pid = 0

    def _keyed_db(self) -> sqlite3.Connection:
        # A connection must not cross a fork (Spark forks its Python workers).
        if self._keyed is None or self._keyed_pid != os.getpid():
            os.makedirs(os.path.dirname(self.keyed_path), exist_ok=True)
            connection = sqlite3.connect(self.keyed_path, timeout=_BUSY_S, isolation_level=None)
            _set_up(connection)
            self._keyed, self._keyed_pid = connection, os.getpid()
        return self._keyed

    def read_emitted(self, operator: str, key_groups: Iterable[int]) -> dict[int, pa.Table]:
        """The rows each group's last commit emitted."""
        found = {}
        for kg, emitted in self._select("emitted", operator, key_groups):
            if emitted:
                self.bytes_read += len(emitted)
                found[int(kg)] = ipc_table(emitted)
        return found

    def _commit(self, operator: str, epoch: int, plan: Plan) -> int:
        """The new runs written to one file first, then every group's row in one
        transaction, then the files no row names any more deleted."""
        name = run_file_name(epoch)
        written = (write_runs(os.path.join(self._operator_dir(operator), name), plan.tables)
                   if plan.tables else 0)
        saves: dict[int, tuple[str, bytes | None]] = {}
        for kg, change in plan.live.items():
            listed = plan.listed(kg, name)
            emitted = ipc_bytes(change.emitted) if change.emitted is not None else None
            saves[kg] = (runs_json(listed), emitted)
            written += len(emitted) if emitted else 0
        self._save(operator, epoch, saves, plan.before)
        named = {run.file for (text,) in self._keyed_db().execute(
            "SELECT runs FROM keyed_groups WHERE operator = ?", (operator,))
            for run in runs_from_json(text)}
        _MAPPED.collect(self._operator_dir(operator), named, epoch)
        return written

    def _save(
        self,
        operator: str,
        epoch: int,
        saves: Mapping[int, tuple[str, bytes | None]],
        before: Mapping[int, GroupRow],
    ) -> None:
        """Saves the groups' rows in one transaction, each unless its mark reached the
        epoch meanwhile (another attempt committed it)."""
        db = self._keyed_db()
        db.execute("BEGIN IMMEDIATE")
        try:
            now = self._rows(operator, saves)
            for kg, (runs, emitted) in saves.items():
                current = now.get(kg)
                if current is not None and current.epoch >= epoch:
                    continue
                if (current.text if current else None) != (
                    before[kg].text if kg in before else None
                ):
                    raise StreamRuntimeError(
                        f"key group {kg} of {operator!r} changed under the commit of epoch {epoch}"
                    )
                db.execute(_SAVE, (operator, kg, epoch, emitted, runs))
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def _loaded(self, operator: str, run: Run) -> Loaded:
        """The run from its file, mapped: a file never changes once written, so this process
        keeps the ones its groups name mapped."""
        path = os.path.join(self.runs_root, operator.encode().hex(), str(run.file))
        return _MAPPED.file(path).loaded(run)

    def _rows(self, operator: str, key_groups: Iterable[int]) -> dict[int, GroupRow]:
        rows = self._select("epoch, runs", operator, key_groups)
        return {int(kg): GroupRow(int(epoch), runs_from_json(text), text)
                for kg, epoch, text in rows}

    def _select(self, columns: str, operator: str, key_groups: Iterable[int]) -> sqlite3.Cursor:
        """The key group and ``columns`` of those of ``key_groups`` that have a row."""
        return self._keyed_db().execute(
            f"SELECT key_group, {columns} FROM keyed_groups WHERE operator = ?"
            " AND key_group IN (SELECT value FROM json_each(?))",
            (operator, json.dumps(sorted(set(key_groups)))))

    def _operator_dir(self, operator: str) -> str:
        directory = os.path.join(self.runs_root, operator.encode().hex())
        os.makedirs(directory, exist_ok=True)
        return directory

    def groups(self, operator: str) -> set[int]:
        """Key groups of ``operator`` that hold entries."""
        rows = self._keyed_db().execute(
            "SELECT key_group FROM keyed_groups WHERE operator = ? AND runs != '[]'", (operator,)
        )
        return {int(kg) for (kg,) in rows}

    def size(self) -> StateSize:
        """The bytes of its files (group rows and runs), and the entries and groups its rows
        list; nothing is created for a store that was never written."""
        if not os.path.exists(self.keyed_path):
            return StateSize(0, 0, 0)
        entries = groups = 0
        for (text,) in self._keyed_db().execute("SELECT runs FROM keyed_groups"):
            rows = sum(run.rows for run in runs_from_json(text))
            entries, groups = entries + rows, groups + (rows > 0)
        root = os.path.dirname(self.keyed_path)
        prefix = os.path.basename(self.keyed_path).split(".keyed.")[0]
        on_disk = sum(os.path.getsize(os.path.join(folder, name))
                      for folder, _, names in os.walk(root) for name in names
                      if os.path.relpath(os.path.join(folder, name), root).startswith(prefix))
        return StateSize(on_disk, entries, groups)

    def clear(self) -> None:
        """Forgets every group's state and its files."""
        self._keyed_db().execute("DELETE FROM keyed_groups")
        shutil.rmtree(self.runs_root, ignore_errors=True)
        _MAPPED.forget(self.runs_root)

