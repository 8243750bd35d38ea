"""An ack that never left the driver: the epoch that applied its command ended (its outcome
logged), then the driver was killed with the ack still queued. The change runs all the same,
so the next start must acknowledge it; the listener resumes past the command and would not."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import redis

from engine.runtime.api import request_reconfiguration
from engine.runtime.control.channel import RedisControlChannel
from engine.runtime.driver.epoch_log import EpochLog
from tests.engine.runtime.engine_process import (
    engine_env,
    engine_run_command,
    printed_lines,
    wait_for_epoch_line,
)
from tests.engine.runtime.jobs import window_job

pytestmark = pytest.mark.spark


def test_an_ack_a_kill_kept_from_the_channel_is_sent_by_the_next_start(
    tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    dag = tmp_path / "job.json"
    dag.write_text(json.dumps(window_job({"type": "sink.memory", "params": {}})))
    checkpoint, run_id = tmp_path / "ckpt", f"acks-{uuid.uuid4().hex[:6]}"
    options = ("--run-id", run_id, "--control", redis_url, "--control-prefix", redis_prefix)
    channel = RedisControlChannel(redis_url, run_id, redis_prefix)
    client = redis.Redis.from_url(redis_url)
    # The channel refuses acks: the hash that guards them holds a string, so the driver's
    # HSETNX fails and its outbox keeps the ack, retrying.
    client.set(channel._acked_key, "not a hash")
    proc = subprocess.Popen(
        engine_run_command(dag, checkpoint, 500, *options), stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, env=engine_env(tmp_path), start_new_session=True,
    )
    try:
        lines = printed_lines(proc)
        assert wait_for_epoch_line(lines, proc, 300), "no epoch before the request"
        request = request_reconfiguration(channel, kind="rescale", operator="counts",
                                          parallelism=3)
        log = EpochLog(str(checkpoint / "epochs"))
        applied = _wait_for_ended(log, request, timeout_s=60)
        assert wait_for_epoch_line(lines, proc, 60, applied + 1), "the run stopped"
        assert channel.acks() == []  # still queued in the driver
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    client.delete(channel._acked_key)
    ended_ms = os.stat(checkpoint / "epochs" / f"{applied:012d}.outcome.json").st_mtime * 1000

    again = subprocess.run(engine_run_command(dag, checkpoint, applied + 4, *options),
                           capture_output=True, text=True, env=engine_env(tmp_path), timeout=400)

    assert again.returncode == 0, again.stderr[-2000:]
    acks = channel.acks()
    assert [a.request_id for a in acks] == [request]
    assert acks[0].status == "applied"
    assert acks[0].applied_epoch == applied
    assert acks[0].after["parallelism"] == 3
    assert abs(acks[0].epoch_ended_at_ms - ended_ms) < 1.0


def _wait_for_ended(log: EpochLog, request_id: str, timeout_s: float) -> int:
    """The epoch whose logged plan carries ``request_id``'s ack, once its outcome is logged."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for epoch, acks, _ in log.ended_acks():
            if any(a.request_id == request_id for a in acks):
                return epoch
        time.sleep(0.01)
    raise AssertionError(f"no epoch applied {request_id} and ended within {timeout_s} s")
