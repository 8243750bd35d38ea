"""PostgreSQL sink: an epoch's rows and its commit record in one transaction.

A DataFrame's rows never pass through the driver: each executor task copies its partition
into a staging table through its worker's pooled connection (replacing what an earlier
attempt of the same task staged), then the driver, in one transaction, claims
(sink, epoch) in the commit table and moves the epoch's staged rows into the target table.
A replayed epoch finds its claim and writes nothing.

Only the sink schema (``sink_schema``) of the sink database is written, never the
product's tables; each row carries the run id and the epoch.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from functools import partial
from typing import Any

import psycopg2
import pyarrow as pa
import pyarrow.csv as pacsv
from pyspark.sql.pandas.types import to_arrow_schema

from engine.dag.sinks import COMMITS_TABLE, STAGING_SUFFIX
from engine.runtime.errors import StreamRuntimeError
from engine.runtime.io.data_access import SINK_DSN_VARIABLE, sink_dsn, sink_schema, sink_table
from engine.runtime.io.sinks import Sink
from engine.runtime.spark.frames import Frame

_PG_TYPES = {
    pa.int64(): "bigint",
    pa.int32(): "integer",
    pa.float64(): "double precision",
    pa.string(): "text",
    pa.bool_(): "boolean",
}
_CONNECTIONS: dict[str, Any] = {}  # one per dsn and Python worker, reused across tasks


class PostgresSink(Sink):
    """Appends rows to ``table`` in the sink schema (created from the first epoch's schema)
    with ``run_id`` and ``epoch`` columns; ``streamscale_sink_commits(sink, epoch)`` makes
    replays no-ops."""

    def __init__(self, table: str, run_id: str, sink_id: str, dsn: str | None = None) -> None:
        self.table = sink_table(table)
        self.staging = sink_table(f"{table}{STAGING_SUFFIX}")
        self.commits = sink_table(COMMITS_TABLE)
        self.schema = sink_schema()
        self.dsn = dsn or sink_dsn()
        if not self.dsn:
            raise StreamRuntimeError(
                f"sink.postgres {table!r}: set {SINK_DSN_VARIABLE} (the sink database)"
            )
        self.run_id = run_id
        self.sink_id = sink_id

    def write_epoch(self, df: Frame, epoch: int) -> int:
        """Stages the rows from where they are, then commits them with the claim."""
        conn = psycopg2.connect(self.dsn)
        try:
            with conn, conn.cursor() as cur:
                cur.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            if _claimed(conn, self.commits, self.sink_id, epoch):
                return 0
            schema = _arrow_schema(df)
            with conn, conn.cursor() as cur:
                cur.execute(_create_table_sql(self.table, schema, _TARGET_COLUMNS))
                cur.execute(_create_table_sql(self.staging, schema, _STAGING_COLUMNS))
            _stage(df, self.dsn or "", self.staging, self.sink_id, epoch)
            return _commit(conn, self.commits, self.table, self.staging,
                           (self.sink_id, self.run_id, epoch), schema)
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


def _stage(df: Frame, dsn: str, staging: str, sink_id: str, epoch: int) -> None:
    """Each partition's rows into the staging table, from where the rows are."""
    if isinstance(df, pa.Table):
        _stage_batches(dsn, staging, sink_id, epoch, 0, iter(df.to_batches()))
        return
    task = partial(_stage_partition, dsn, staging, sink_id, epoch)
    df.mapInArrow(task, "rows long").collect()


def _stage_partition(
    dsn: str, staging: str, sink_id: str, epoch: int, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body on an executor: stage this partition, answer its row count."""
    from pyspark import TaskContext

    context = TaskContext.get()
    part = context.partitionId() if context is not None else 0
    rows = _stage_batches(dsn, staging, sink_id, epoch, part, batches)
    yield pa.record_batch([pa.array([rows], pa.int64())], names=["rows"])


def _stage_batches(
    dsn: str, staging: str, sink_id: str, epoch: int, part: int, batches: Iterator[pa.RecordBatch]
) -> int:
    conn = _pooled(dsn)
    rows = 0
    try:
        with conn, conn.cursor() as cur:
            cur.execute(
                f"DELETE FROM {staging} WHERE __sink = %s AND __epoch = %s AND __part = %s",
                (sink_id, epoch, part),
            )
            for batch in batches:
                if batch.num_rows:
                    _copy(cur, staging, pa.Table.from_batches([batch]), (sink_id, epoch, part))
                    rows += batch.num_rows
    except psycopg2.Error:
        _CONNECTIONS.pop(dsn, None)  # a broken connection is not reused
        raise
    return rows


def _pooled(dsn: str) -> Any:
    conn = _CONNECTIONS.get(dsn)
    if conn is None or conn.closed:
        conn = psycopg2.connect(dsn)
        _CONNECTIONS[dsn] = conn
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
