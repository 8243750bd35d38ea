"""The Redis state store on a standalone cluster must not lose writes of committed epochs:
a state Redis that would (fsync once a second) is refused before Spark starts, and a state
Redis killed with SIGKILL mid-run and started again leaves the results exact (the run goes on,
or fails naming the lost connection and resumes from its checkpoint)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import redis

from engine.runtime.spark.session import project_root
from engine.runtime.state.redis_durability import (
    FSYNC_ALWAYS,
    NOT_DURABLE,
    StateNotDurable,
    durability_of,
    require_durable,
)
from tests.engine.runtime.cluster import LoopbackCluster
from tests.engine.runtime.engine_process import (
    engine_env,
    engine_run_command,
    printed_lines,
    run_start_ms,
    wait_for_epoch_line,
)
from tests.engine.runtime.jobs import actual_windows, expected_windows, window_job
from tests.engine.runtime.state_redis import StateRedis, state_redis_fixture  # noqa: F401

LAST_EPOCH = 11
KILL_AFTER_EPOCH = 3


def test_the_fsync_policy_of_the_state_redis_is_checked(tmp_path: Path) -> None:
    durable = StateRedis(tmp_path / "always", fsync="always").start()
    lossy = StateRedis(tmp_path / "everysec", fsync="everysec").start()
    try:
        assert durability_of(redis.Redis.from_url(durable.url)).mode == FSYNC_ALWAYS
        assert durability_of(redis.Redis.from_url(lossy.url)).mode == NOT_DURABLE
        assert require_durable(durable.url).mode == FSYNC_ALWAYS
        with pytest.raises(StateNotDurable) as refused:
            require_durable(lossy.url)
    finally:
        durable.stop()
        lossy.stop()
    assert str(refused.value).startswith(
        f"the state Redis at {lossy.url} would lose writes of committed epochs in a crash "
        "(appendonly=yes, appendfsync=everysec, version ")


def test_the_engine_refuses_a_lossy_state_redis_before_starting_spark(tmp_path: Path) -> None:
    lossy = StateRedis(tmp_path / "everysec", fsync="everysec").start()
    dag = tmp_path / "job.json"
    dag.write_text(json.dumps(window_job({"type": "sink.memory", "params": {}})))
    try:
        refused = subprocess.run(
            [sys.executable, "-m", "engine", "run", str(dag), "--checkpoint",
             str(tmp_path / "ckpt"), "--state", lossy.url],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": project_root()},
        )
    finally:
        lossy.stop()
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"error: the state Redis at {lossy.url} would lose writes")
    assert not (tmp_path / "ckpt" / "spark").exists()


@pytest.mark.spark
def test_a_state_redis_killed_mid_run_leaves_the_results_exact(
    spark, tmp_path: Path, state_redis: StateRedis
) -> None:
    state = state_redis
    cluster = LoopbackCluster(tmp_path)
    cluster.start()
    out = tmp_path / "out"
    dag = tmp_path / "job.json"
    dag.write_text(json.dumps(
        window_job({"type": "sink.files", "params": {"path": "out", "format": "parquet"}})))
    command = engine_run_command(dag, tmp_path / "ckpt", LAST_EPOCH, "--master", cluster.url,
                                 "--run-id", "state-kill", "--state", state.url)
    env = engine_env(tmp_path, cluster=True)
    try:
        first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=env)
        assert wait_for_epoch_line(printed_lines(first), first, 240, KILL_AFTER_EPOCH), \
            f"epoch {KILL_AFTER_EPOCH} not reached"

        state.kill()  # mid-run, writes of the epoch in progress in flight
        time.sleep(1.0)
        state.start()  # same port and folder: the append-only file is replayed

        _, errors = first.communicate(timeout=400)
        if first.returncode != 0:
            # It may fail on the lost connection: then it says so, and resumes exactly.
            assert "error: run failed: " in errors
            assert "redis" in errors.lower() or "connection" in errors.lower(), errors[-2000:]
            final = subprocess.run(command, capture_output=True, text=True, env=env, timeout=400)
            assert final.returncode == 0, final.stderr[-2000:]
    finally:
        cluster.stop()
    start_ms = run_start_ms(tmp_path / "ckpt")
    expected = expected_windows(spark, start_ms, LAST_EPOCH, [(0, "event_type = 'view'")])
    assert expected and actual_windows(pq.read_table(str(out))) == expected
