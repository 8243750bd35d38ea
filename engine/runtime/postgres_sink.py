"""PostgreSQL sink: an epoch's rows and its commit record in one transaction."""

from __future__ import annotations

import io
import os

import psycopg2
import pyarrow as pa
import pyarrow.csv as pacsv

from engine.runtime.errors import StreamRuntimeError
from engine.runtime.frames import Frame, to_arrow
from engine.runtime.sinks import Sink

COMMITS_TABLE = "streamscale_sink_commits"
_PG_TYPES = {
    pa.int64(): "bigint",
    pa.int32(): "integer",
    pa.float64(): "double precision",
    pa.string(): "text",
    pa.bool_(): "boolean",
}


class PostgresSink(Sink):
    """Appends rows to ``table`` (created from the first epoch's schema) with an
    ``epoch`` column; ``streamscale_sink_commits(sink, epoch)`` makes replays no-ops."""

    def __init__(self, table: str, dsn: str | None, sink_id: str) -> None:
        self.table = table
        self.dsn = dsn or os.environ.get("STREAMSCALE_SINK_DSN") or os.environ.get("DATABASE_URL")
        if not self.dsn:
            raise StreamRuntimeError(
                f"sink.postgres {table!r}: set params.dsn or STREAMSCALE_SINK_DSN / DATABASE_URL"
            )
        self.sink_id = sink_id

    def write_epoch(self, df: Frame, epoch: int) -> int:
        """One transaction: claim (sink, epoch), create the table if needed, COPY rows."""
        rows = to_arrow(df)
        conn = psycopg2.connect(self.dsn)
        try:
            return self._commit(conn, rows, epoch)
        finally:
            conn.close()

    def _commit(self, conn, rows: pa.Table, epoch: int) -> int:  # type: ignore[no-untyped-def]
        with conn, conn.cursor() as cur:
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {COMMITS_TABLE} (sink text, epoch bigint, "
                "committed_at timestamptz DEFAULT now(), PRIMARY KEY (sink, epoch))"
            )
            cur.execute(
                f"INSERT INTO {COMMITS_TABLE} (sink, epoch) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING RETURNING epoch",
                (self.sink_id, epoch),
            )
            if cur.fetchone() is None:
                conn.rollback()
                return 0
            cur.execute(_create_table_sql(self.table, rows.schema))
            if rows.num_rows:
                _copy(cur, self.table, rows, epoch)
        return rows.num_rows


def _pg_type(arrow_type: pa.DataType) -> str:
    if pa.types.is_timestamp(arrow_type):
        return "timestamptz"
    return _PG_TYPES.get(arrow_type, "text")


def _create_table_sql(table: str, schema: pa.Schema) -> str:
    columns = ", ".join(f'"{f.name}" {_pg_type(f.type)}' for f in schema)
    return f"CREATE TABLE IF NOT EXISTS {table} (epoch bigint NOT NULL, {columns})"


def _copy(cur, table: str, rows: pa.Table, epoch: int) -> None:  # type: ignore[no-untyped-def]
    rows = rows.add_column(0, "epoch", pa.array([epoch] * rows.num_rows, pa.int64()))
    buffer = io.BytesIO()
    pacsv.write_csv(rows, buffer, pacsv.WriteOptions(include_header=False))
    buffer.seek(0)
    names = ", ".join(f'"{n}"' for n in rows.column_names)
    cur.copy_expert(f"COPY {table} ({names}) FROM STDIN WITH (FORMAT csv)", buffer)
