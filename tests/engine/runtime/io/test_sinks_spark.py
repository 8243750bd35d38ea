"""Sinks commit an epoch once: writing a replayed epoch changes nothing."""

from __future__ import annotations

import uuid

import psycopg2
import pyarrow.parquet as pq
import pytest

from engine.runtime.io.postgres_sink import PostgresSink
from engine.runtime.io.sinks import FilesSink, MemorySink, clear_memory_sink, memory_sink_rows

pytestmark = pytest.mark.spark


def test_postgres_sink_commits_each_epoch_exactly_once(spark, postgres_dsn) -> None:  # type: ignore[no-untyped-def]
    from engine.runtime.io.data_access import sink_schema

    table = f"sink_{uuid.uuid4().hex[:8]}"
    sink = PostgresSink(table, "run-7", f"test/{table}", dsn=postgres_dsn)
    df = spark.createDataFrame([(1, "a", 1.5), (2, "b", 2.5)], "id long, name string, x double")
    assert sink.write_epoch(df.repartition(2), 0) == 2
    assert sink.write_epoch(df, 0) == 0  # replay
    assert sink.write_epoch(df.limit(1), 1) == 1
    qualified = f'"{sink_schema()}"."{table}"'
    with psycopg2.connect(postgres_dsn) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT run_id, epoch, id, name, x FROM {qualified} ORDER BY epoch, id")
        assert cur.fetchall() == [
            ("run-7", 0, 1, "a", 1.5), ("run-7", 0, 2, "b", 2.5), ("run-7", 1, 1, "a", 1.5)
        ]
        # Only the sink schema is written.
        cur.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE %s AND schemaname <> %s",
                    [f"{table}%", sink_schema()])
        assert cur.fetchone() == (0,)
        cur.execute(f'SELECT count(*) FROM "{sink_schema()}"."{table}__staging"')
        assert cur.fetchone() == (0,)  # nothing left staged once committed
        cur.execute(f'DROP TABLE {qualified}, "{sink_schema()}"."{table}__staging"')


def test_files_and_memory_sinks_skip_a_committed_epoch(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    df = spark.createDataFrame([(1,), (2,)], "id long")
    files = FilesSink(str(tmp_path / "out"), "parquet")
    files.write_epoch(df, 3)
    files.write_epoch(df, 3)
    files.write_epoch(df.toArrow(), 4)
    assert sorted(pq.read_table(str(tmp_path / "out"))["id"].to_pylist()) == [1, 1, 2, 2]
    name = f"mem_{uuid.uuid4().hex[:6]}"
    memory = MemorySink(name)
    assert memory.write_epoch(df, 0) == 2 and memory.write_epoch(df, 0) == 0
    assert memory_sink_rows(name).num_rows == 2
    clear_memory_sink(name)
