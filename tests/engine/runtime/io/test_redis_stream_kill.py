"""Exactly once from a Redis stream under SIGKILL: the driver process is killed at random
points mid-run and restarted from its checkpoint; the windows it commits must equal those
of a batch read of the same entries, each window once."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import redis

from engine.runtime.spark.session import project_root
from tests.engine.runtime.broker_jobs import (
    batch_windows,
    fill_stream,
    last_epoch_for,
    sink_windows,
    stream_job,
    write_tail,
)
from tests.engine.runtime.driver.test_exactly_once_kill import _lines, _wait_for_epoch_line

pytestmark = pytest.mark.spark

KILLS = 4
CAP = 500


def test_sigkill_mid_epoch_then_restart_reads_each_entry_once(
    tmp_path: Path, service_urls: dict[str, str]
) -> None:
    url = service_urls["redis_url"]
    client = redis.Redis.from_url(url)
    stream = f"sstest-{uuid.uuid4().hex[:8]}:kill"
    total = fill_stream(client, stream, 0, 10000, malformed_every=1000)
    total += write_tail(client, stream, CAP)
    last = last_epoch_for(total, CAP)
    out = tmp_path / "out"
    dag = tmp_path / "job.json"
    dag.write_text(json.dumps(stream_job(
        url, [stream], CAP, {"type": "sink.files", "params": {"path": "out",
                                                              "format": "parquet"}})))
    command = [sys.executable, "-m", "engine", "run", str(dag), "--checkpoint",
               str(tmp_path / "ckpt"), "--trigger-ms", "0", "--stop-after-epoch", str(last)]
    env = {**os.environ, "PYTHONPATH": project_root(), "STREAMSCALE_DATA_DIR": str(tmp_path)}
    rng = random.Random(20261123)
    try:
        for _ in range(KILLS):
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    text=True, env=env, start_new_session=True)
            assert _wait_for_epoch_line(_lines(proc), proc, 300), "no epoch before the kill"
            time.sleep(rng.uniform(0.0, 1.5))
            assert proc.poll() is None, "the run finished before it could be killed"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        final = subprocess.run(command, capture_output=True, text=True, env=env, timeout=400)
        assert final.returncode == 0, final.stderr[-2000:]
        committed = sorted(p.name for p in out.iterdir() if p.name.startswith("epoch="))
        assert len(committed) == last + 1
        expected = batch_windows(client, [stream])
        assert len(expected) > 100
        assert sink_windows(pq.read_table(str(out))) == expected
    finally:
        client.delete(stream)
