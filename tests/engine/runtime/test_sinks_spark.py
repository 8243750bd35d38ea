"""Sinks commit an epoch once: writing a replayed epoch changes nothing."""

from __future__ import annotations

import uuid

import psycopg2
import pyarrow.parquet as pq
import pytest

from engine.runtime.postgres_sink import PostgresSink
from engine.runtime.sinks import FilesSink, MemorySink, clear_memory_sink, memory_sink_rows

pytestmark = pytest.mark.spark


def test_postgres_sink_commits_each_epoch_exactly_once(spark, postgres_dsn) -> None:  # type: ignore[no-untyped-def]
    table = f"sink_{uuid.uuid4().hex[:8]}"
    sink = PostgresSink(table, postgres_dsn, f"test/{table}")
    df = spark.createDataFrame([(1, "a", 1.5), (2, "b", 2.5)], "id long, name string, x double")
    assert sink.write_epoch(df, 0) == 2
    assert sink.write_epoch(df, 0) == 0  # replay
    assert sink.write_epoch(df.limit(1), 1) == 1
    with psycopg2.connect(postgres_dsn) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT epoch, id, name, x FROM {table} ORDER BY epoch, id")
        assert cur.fetchall() == [(0, 1, "a", 1.5), (0, 2, "b", 2.5), (1, 1, "a", 1.5)]
        cur.execute(f"DROP TABLE {table}")


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
