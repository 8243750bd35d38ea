"""An ack a kill may have kept from the host: the epoch that applied its command ended (its
outcome logged), then the driver was killed, its ack perhaps still queued. The change runs
all the same, so the next start must acknowledge it again, with when that epoch ended; the
listener resumes past the command and would not."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from engine.runtime.api import request_reconfiguration
from engine.runtime.control.channel import RedisControlChannel
from engine.runtime.driver.epoch_log import EpochLog
from tests.engine.runtime.engine_process import (
    engine_env,
    engine_run_command,
    printed_acks,
    printed_lines,
    wait_for_epoch_line,
)
from tests.engine.runtime.jobs import window_job
from tests.waiting import wait_for

pytestmark = pytest.mark.spark


def test_the_ack_of_an_epoch_that_ended_before_a_kill_is_sent_by_the_next_start(
    tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    dag = tmp_path / "job.json"
    dag.write_text(json.dumps(window_job({"type": "sink.memory", "params": {}})))
    checkpoint, run_id = tmp_path / "ckpt", f"acks-{uuid.uuid4().hex[:6]}"
    options = ("--run-id", run_id, "--control", redis_url, "--control-prefix", redis_prefix)
    channel = RedisControlChannel(redis_url, run_id, redis_prefix)
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
        applied = wait_for(lambda: _ended_with(log, request), timeout=60,
                             what=f"an epoch that applied {request} and ended")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    ended_ms = os.stat(checkpoint / "epochs" / f"{applied:012d}.outcome.json").st_mtime * 1000

    again = subprocess.run(engine_run_command(dag, checkpoint, applied + 4, *options),
                           capture_output=True, text=True, env=engine_env(tmp_path), timeout=400)
    channel.delete()

    assert again.returncode == 0, again.stderr[-2000:]
    acks = [a for a in printed_acks(again.stdout.splitlines()) if a.request_id == request]
    assert len(acks) == 1 and acks[0].status == "applied"
    assert acks[0].applied_epoch == applied
    assert acks[0].after["parallelism"] == 3
    assert abs(acks[0].epoch_ended_at_ms - ended_ms) < 1.0


def _ended_with(log: EpochLog, request_id: str) -> int | None:
    """The epoch whose logged plan carries ``request_id``'s ack, once its outcome is logged."""
    return next((epoch for epoch, acks, _ in log.ended_acks()
                 if any(a.request_id == request_id for a in acks)), None)
