"""PostgreSQL sink: an epoch's rows and its commit record in one transaction.

A DataFrame's rows never pass through the driver: each executor task copies its partition
into a staging table through its worker's pooled connection (replacing what an earlier
attempt of the same task staged), then the driver, in one transaction, claims
(sink, epoch) in the commit table and moves the epoch's staged rows into the target table.
A replayed epoch finds its claim and writes nothing.

Only the sink schema (``sink_schema``) of the sink database is written, never the
product's tables; each row carries the run id and the epoch.

A lost connection (the server restarting) is not a crash: each step opens a new connection and
is tried again with back-off until ``RECONNECT_WITHIN_S`` after the epoch's write began, and
only then fails the epoch (a transient failure: the run restarts from its checkpoint). Every
step may be repeated: staging replaces its partition's rows, and the claim makes the commit
happen once even when its COMMIT reached the server but the answer was lost.
"""

from __future__ import annotations

import contextlib
import io
import logging
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, TypeVar

import psycopg2
import pyarrow as pa
import pyarrow.csv as pacsv
from pyspark.sql.pandas.types import to_arrow_schema

from engine.dag.sinks import COMMITS_TABLE, STAGING_SUFFIX
from engine.runtime.errors import StreamRuntimeError
from engine.runtime.io.data_access import SINK_DSN_VARIABLE, sink_dsn, sink_schema, sink_table
from engine.runtime.io.sinks import Sink
from engine.runtime.spark.frames import Frame

log = logging.getLogger("streamscale.sink.postgres")
T = TypeVar("T")

_PG_TYPES = {
    pa.int64(): "bigint",
    pa.int32(): "integer",
    pa.float64(): "double precision",
    pa.string(): "text",
    pa.bool_(): "boolean",
}
_CONNECTIONS: dict[str, Any] = {}  # one per dsn and Python worker, reused across tasks
# A PostgreSQL restart, crash recovery included, takes seconds; an epoch waits this long for
# the server before its run spends a restart.
RECONNECT_WITHIN_S = 60.0
FIRST_RETRY_S, MAX_RETRY_S = 0.5, 5.0
# What psycopg2 raises when the server is gone or restarting (refused, reset, "terminating
# connection due to administrator command", a closed connection); SQL errors are not among them.
CONNECTION_LOST = (psycopg2.OperationalError, psycopg2.InterfaceError)


class SinkUnreachable(StreamRuntimeError):
    """The sink database did not answer within ``RECONNECT_WITHIN_S``: a transient failure."""


def retrying(step: Callable[[], T], *, what: str, deadline: float) -> T:
    """``step()``, tried again with back-off while it loses its connection, until ``deadline``
    (wall clock: executors compare with the driver's). Raises SinkUnreachable naming ``what``."""
    wait = FIRST_RETRY_S
    while True:
        try:
            return step()
        except CONNECTION_LOST as error:
            cause = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            if time.time() + wait > deadline:
                raise SinkUnreachable(
                    f"{what}: the sink database did not answer for {RECONNECT_WITHIN_S:.0f} s "
                    f"({cause}); a transient failure, the run restarts from its checkpoint"
                ) from error
            log.warning("%s: lost the sink database (%s); retried in %.1f s", what, cause, wait)
        time.sleep(wait)
        wait = min(wait * 2, MAX_RETRY_S)


class PostgresSink(Sink):
    """Appends rows to ``table`` in the sink schema (created from the first epoch's schema)
    with ``run_id`` and ``epoch`` columns; ``streamscale_sink_commits(sink, epoch)`` makes
    replays no-ops."""

    def __init__(self, table: str, run_id: str, sink_id: str, dsn: str | None = None) -> None:
        self.table = sink_table(table)
        self.staging = sink_table(f"{table}{STAGING_SUFFIX}")
        self.commits = sink_table(COMMITS_TABLE)
        self.schema = sink_schema()
        found = dsn or sink_dsn()
        if not found:
            raise StreamRuntimeError(
                f"sink.postgres {table!r}: set {SINK_DSN_VARIABLE} (the sink database)"
            )
        self.dsn: str = found
        self.run_id = run_id
        self.sink_id = sink_id

    def write_epoch(self, df: Frame, epoch: int) -> int:
        """Stages the rows from where they are, then commits them with the claim; each step
        waits out a server restart (``retrying``)."""
        deadline = time.time() + RECONNECT_WITHIN_S
        what = f"sink.postgres {self.table} epoch {epoch}"
        schema = _arrow_schema(df)
        if retrying(lambda: self._prepare(schema, epoch), what=f"{what}: prepare",
                    deadline=deadline):
            return 0
        _stage(df, self.dsn, self.staging, self.sink_id, epoch, deadline)
        return retrying(
            lambda: self._connected(lambda conn: _commit(
                conn, self.commits, self.table, self.staging, (self.sink_id, self.run_id, epoch),
                schema)),
            what=f"{what}: commit", deadline=deadline)

    def _prepare(self, schema: pa.Schema, epoch: int) -> bool:
        """Creates what is missing; True if the epoch is already committed (a replay)."""

        def prepare(conn: Any) -> bool:
            with conn, conn.cursor() as cur:
                cur.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            if _claimed(conn, self.commits, self.sink_id, epoch):
                return True
            with conn, conn.cursor() as cur:
                cur.execute(_create_table_sql(self.table, schema, _TARGET_COLUMNS))
                cur.execute(_create_table_sql(self.staging, schema, _STAGING_COLUMNS))
            return False

        return self._connected(prepare)

    def _connected(self, step: Callable[[Any], T]) -> T:
        """``step`` on a new connection: one lost in a restart is never used again."""
        conn = psycopg2.connect(self.dsn, connect_timeout=5)
        try:
            return step(conn)
        finally:
            conn.close()


_TARGET_COLUMNS = "run_id text NOT NULL, epoch bigint NOT NULL"
_STAGING_COLUMNS = "__sink text NOT NULL, __epoch bigint NOT NULL, __part integer NOT NULL"


def _claimed(conn: Any, commits: str, sink_id: str, epoch: int) -> bool:
    with conn, conn.cursor() as cur:
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS {commits} (sink text, epoch bigint, "
            "committed_at timestamptz DEFAULT now(), PRIMARY KEY (sink, epoch))"
        )
        cur.execute(f"SELECT 1 FROM {commits} WHERE sink = %s AND epoch = %s", (sink_id, epoch))
        return cur.fetchone() is not None


def _arrow_schema(df: Frame) -> pa.Schema:
    if isinstance(df, pa.Table):
        return df.schema
    timezone = df.sparkSession.conf.get("spark.sql.session.timeZone")
    return to_arrow_schema(df.schema, timezone=timezone)


def _stage(
    df: Frame, dsn: str, staging: str, sink_id: str, epoch: int, deadline: float
) -> None:
    """Each partition's rows into the staging table, from where the rows are."""
    if isinstance(df, pa.Table):
        _stage_batches(dsn, staging, (sink_id, epoch, 0), iter(df.to_batches()), deadline)
        return
    task = partial(_stage_partition, dsn, staging, sink_id, epoch, deadline)
    df.mapInArrow(task, "rows long").collect()


def _stage_partition(
    dsn: str, staging: str, sink_id: str, epoch: int, deadline: float,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body on an executor: stage this partition, answer its row count."""
    from pyspark import TaskContext

    context = TaskContext.get()
    part = context.partitionId() if context is not None else 0
    rows = _stage_batches(dsn, staging, (sink_id, epoch, part), batches, deadline)
    yield pa.record_batch([pa.array([rows], pa.int64())], names=["rows"])


def _stage_batches(
    dsn: str, staging: str, tags: tuple[str, int, int], batches: Iterator[pa.RecordBatch],
    deadline: float,
) -> int:
    """Stages one partition, waiting out a server restart. The partition's batches are kept
    for a retry: failing the Spark task instead would compute the epoch's input again, and
    a retry here costs one partition of one epoch in memory."""
    kept = [batch for batch in batches if batch.num_rows]
    what = f"sink.postgres {staging} epoch {tags[1]} partition {tags[2]}: stage"
    return retrying(lambda: _stage_once(dsn, staging, tags, kept), what=what, deadline=deadline)


def _stage_once(
    dsn: str, staging: str, tags: tuple[str, int, int], batches: list[pa.RecordBatch]
) -> int:
    """Replaces what an earlier attempt staged for the partition by its rows."""
    conn = _pooled(dsn)
    try:
        with conn, conn.cursor() as cur:
            cur.execute(
                f"DELETE FROM {staging} WHERE __sink = %s AND __epoch = %s AND __part = %s",
                tags,
            )
            for batch in batches:
                _copy(cur, staging, pa.Table.from_batches([batch]), tags)
    except psycopg2.Error:
        _CONNECTIONS.pop(dsn, None)  # a broken connection is not reused
        with contextlib.suppress(psycopg2.Error):
            conn.close()
        raise
    return sum(batch.num_rows for batch in batches)


def _pooled(dsn: str) -> Any:
    conn = _CONNECTIONS.get(dsn)
    if conn is None or conn.closed:
        conn = _CONNECTIONS[dsn] = psycopg2.connect(dsn, connect_timeout=5)
    return conn


def _commit(
    conn: Any, commits: str, table: str, staging: str, tags: tuple[str, str, int],
    schema: pa.Schema,
) -> int:
    """Claim the epoch and move its staged rows, in one transaction."""
    sink_id, run_id, epoch = tags
    names = ", ".join(f'"{f.name}"' for f in schema)
    where = "__sink = %s AND __epoch = %s"
    with conn, conn.cursor() as cur:
        cur.execute(
            f"INSERT INTO {commits} (sink, epoch) VALUES (%s, %s) "
            "ON CONFLICT DO NOTHING RETURNING epoch",
            (sink_id, epoch),
        )
        if cur.fetchone() is None:
            conn.rollback()
            return 0
        cur.execute(
            f"INSERT INTO {table} (run_id, epoch, {names}) SELECT %s, __epoch, {names} "
            f"FROM {staging} WHERE {where}",
            (run_id, sink_id, epoch),
        )
        rows = int(cur.rowcount)
        cur.execute(f"DELETE FROM {staging} WHERE {where}", (sink_id, epoch))
    return rows


def _pg_type(arrow_type: pa.DataType) -> str:
    if pa.types.is_timestamp(arrow_type):
        return "timestamptz"
    return _PG_TYPES.get(arrow_type, "text")


def _create_table_sql(table: str, schema: pa.Schema, leading: str) -> str:
    columns = ", ".join(f'"{f.name}" {_pg_type(f.type)}' for f in schema)
    return f"CREATE TABLE IF NOT EXISTS {table} ({leading}, {columns})"


def _copy(cur: Any, table: str, rows: pa.Table, tags: tuple[str, int, int]) -> None:
    n = rows.num_rows
    rows = rows.add_column(0, "__part", pa.array([tags[2]] * n, pa.int32()))
    rows = rows.add_column(0, "__epoch", pa.array([tags[1]] * n, pa.int64()))
    rows = rows.add_column(0, "__sink", pa.array([tags[0]] * n, pa.string()))
    buffer = io.BytesIO()
    pacsv.write_csv(rows, buffer, pacsv.WriteOptions(include_header=False))
    buffer.seek(0)
    names = ", ".join(f'"{name}"' for name in rows.column_names)
    cur.copy_expert(f"COPY {table} ({names}) FROM STDIN WITH (FORMAT csv)", buffer)
