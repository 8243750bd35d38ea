"""Exactly once from a Redis stream and from NATS JetStream under SIGKILL: the driver process
is killed at random points mid-run and restarted from its checkpoint; the windows it commits
must equal those of the events written, each window once."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.engine.runtime.broker_jobs import sink_windows
from tests.engine.runtime.brokers import Broker, any_broker_fixture  # noqa: F401
from tests.engine.runtime.engine_process import (
    engine_env,
    engine_run_command,
    printed_lines,
    wait_for_epoch_line,
)

pytestmark = pytest.mark.spark

KILLS = 3
CAP = 500
SEEDS = {"redis": 20261123, "nats": 20261128}  # of the kills' random points


def test_sigkill_mid_epoch_then_restart_reads_each_entry_once(
    tmp_path: Path, any_broker: Broker
) -> None:
    stream = any_broker.streams[0]
    _, last = any_broker.fill_for_run([stream], 10000, CAP, malformed_every=1000)
    out = tmp_path / "out"
    dag = tmp_path / "job.json"
    dag.write_text(json.dumps(any_broker.job(
        [stream], CAP, {"type": "sink.files", "params": {"path": "out", "format": "parquet"}})))
    command = engine_run_command(dag, tmp_path / "ckpt", last, epoch_ms=None)
    env = engine_env(tmp_path)
    rng = random.Random(SEEDS[any_broker.name])
    for _ in range(KILLS):
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True, env=env, start_new_session=True)
        assert wait_for_epoch_line(printed_lines(proc), proc, 300), "no epoch before the kill"
        time.sleep(rng.uniform(0.0, 1.5))
        assert proc.poll() is None, "the run finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    final = subprocess.run(command, capture_output=True, text=True, env=env, timeout=400)
    assert final.returncode == 0, final.stderr[-2000:]
    committed = sorted(p.name for p in out.iterdir() if p.name.startswith("epoch="))
    assert len(committed) == last + 1
    expected = any_broker.expected_windows([stream], 10000)
    assert len(expected) > 100
    assert sink_windows(pq.read_table(str(out))) == expected
