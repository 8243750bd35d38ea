"""Cluster mode: the same job on a loopback standalone cluster (two workers) with the
Redis state store, rescaled while it runs, with exact results."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine.runtime.api import request_reconfiguration
from engine.runtime.control.channel import RedisControlChannel
from engine.runtime.state import StoreSpec, open_store
from tests.engine.runtime.cluster import LoopbackCluster
from tests.engine.runtime.engine_process import (
    engine_env,
    engine_run_command,
    printed_lines,
    run_start_ms,
    wait_for_epoch_line,
    wait_for_printed_ack,
)
from tests.engine.runtime.jobs import actual_windows, expected_windows, window_job
from tests.engine.runtime.state_redis import StateRedis, state_redis_fixture  # noqa: F401

pytestmark = pytest.mark.spark

LAST_EPOCH = 9


def test_rescale_on_a_standalone_cluster_with_the_redis_store(
    spark, tmp_path: Path, redis_prefix: str, redis_url: str, state_redis: StateRedis
) -> None:
    state = state_redis
    cluster = LoopbackCluster(tmp_path)
    cluster.start()
    try:
        out = tmp_path / "out"
        job = window_job({"type": "sink.files", "params": {"path": "out", "format": "parquet"}})
        dag = tmp_path / "job.json"
        dag.write_text(json.dumps(job))
        run_id = f"cluster-{uuid.uuid4().hex[:6]}"
        command = engine_run_command(
            dag, tmp_path / "ckpt", LAST_EPOCH, "--master", cluster.url, "--run-id", run_id,
            "--state", state.url, "--control", redis_url, "--control-prefix", redis_prefix)
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=engine_env(tmp_path, cluster=True))
        lines = printed_lines(proc)
        assert wait_for_epoch_line(lines, proc, 180), proc.stderr.read()[-3000:]  # type: ignore[union-attr]
        channel = RedisControlChannel(redis_url, run_id, redis_prefix)
        printed: list[str] = []
        up = request_reconfiguration(channel, kind="rescale", operator="counts", parallelism=6)
        assert wait_for_printed_ack(lines, proc, up, 120, printed).status == "applied"  # type: ignore[union-attr]
        down = request_reconfiguration(channel, kind="rescale", operator="counts", parallelism=1)
        assert wait_for_printed_ack(lines, proc, down, 120, printed).status == "applied"  # type: ignore[union-attr]
        assert proc.wait(timeout=300) == 0, proc.stderr.read()[-3000:]  # type: ignore[union-attr]
        while not lines.empty():
            printed.append(lines.get())
        assert any("counts[p=6" in line for line in printed)
        assert any("counts[p=1" in line for line in printed)
    finally:
        cluster.stop()
    start_ms = run_start_ms(tmp_path / "ckpt")
    expected = expected_windows(spark, start_ms, LAST_EPOCH, [(0, "event_type = 'view'")])
    assert expected and actual_windows(pq.read_table(str(out))) == expected
    store = open_store(StoreSpec("redis", state.url, f"{redis_prefix}{run_id}"))
    assert store.groups("counts")  # the state lives in Redis, not on the executors
