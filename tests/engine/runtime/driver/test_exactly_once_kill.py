"""Exactly once under SIGKILL: the driver process (with its JVM and Python workers) is
killed at random points, some right after a reconfiguration request, and restarted from
its checkpoint each time; the sinks (windows, and a stream-stream join's pairs) must then
hold exactly the results computed from the generator's definition: nothing lost, nothing
doubled."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine.runtime.api import request_reconfiguration
from engine.runtime.control.channel import RedisControlChannel
from tests.engine.runtime.engine_process import (
    engine_env,
    engine_run_command,
    printed_acks,
    printed_lines,
    run_start_ms,
    wait_for_epoch_line,
)
from tests.engine.runtime.jobs import (
    actual_pairs,
    actual_windows,
    expected_pairs,
    expected_windows,
    window_and_join_job,
)
from tests.engine.runtime.state_redis import state_redis_fixture  # noqa: F401

pytestmark = pytest.mark.spark

KILLS = {"embedded": 3, "redis": 2}  # each kills at random and while a rescale installs
LAST_EPOCH = 22


@pytest.mark.parametrize("store", ["embedded", "redis"])
def test_sigkill_at_random_points_then_restart_is_exactly_once(
    spark, tmp_path: Path, redis_prefix: str, redis_url: str, store: str,
    request: pytest.FixtureRequest,
) -> None:
    """On the embedded store, and on the Redis store as a standalone-cluster run keeps
    state (its runs cached on this machine: a kill can leave a cached file of a commit that
    never happened, which nothing names)."""
    out, pairs_out = tmp_path / "out", tmp_path / "pairs"
    job = window_and_join_job(
        {"type": "sink.files", "params": {"path": "out", "format": "parquet"}},
        {"type": "sink.files", "params": {"path": "pairs", "format": "parquet"}},
    )
    dag = tmp_path / "job.json"
    dag.write_text(json.dumps(job))
    checkpoint = tmp_path / "ckpt"
    run_id = f"kill-{uuid.uuid4().hex[:6]}"
    state = ["--state", request.getfixturevalue("state_redis").url] if store == "redis" else []
    command = engine_run_command(dag, checkpoint, LAST_EPOCH, "--run-id", run_id, "--control",
                                 redis_url, "--control-prefix", redis_prefix, *state)
    env = engine_env(tmp_path)
    channel = RedisControlChannel(redis_url, run_id, redis_prefix)
    rng = random.Random(20261122)
    requests: list[str] = []
    kills = 0
    while kills < KILLS[store]:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            start_new_session=True,
        )
        lines = printed_lines(proc)
        # A JVM's start on a loaded 2-core machine can take minutes; what is tested is the
        # restart, not the start-up time.
        assert wait_for_epoch_line(lines, proc, 300), "no epoch before the kill"
        if kills % 2 == 1:
            # Kill while a reconfiguration is being installed: mostly while the first epoch
            # under the new plan runs (its plan is logged before that).
            requests.append(
                request_reconfiguration(
                    channel,
                    kind="rescale",
                    operator=rng.choice(["counts", "pairs"]),
                    parallelism=rng.randint(1, 8),
                )
            )
            _wait_for_planned(checkpoint / "epochs", requests[-1], timeout_s=10)
            time.sleep(rng.uniform(0.0, 0.2))
        else:
            time.sleep(rng.uniform(0.0, 2.5))
        if proc.poll() is not None:
            break  # it finished on its own: the remaining kills cannot happen
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
    final = subprocess.run(command, capture_output=True, text=True, env=env, timeout=400)
    assert final.returncode == 0, final.stderr[-2000:]
    assert kills == KILLS[store]

    start_ms = run_start_ms(checkpoint)
    expected = expected_windows(spark, start_ms, LAST_EPOCH, [(0, "event_type = 'view'")])
    assert expected
    for directory in (out, pairs_out):
        committed = sorted(p.name for p in directory.iterdir() if p.name.startswith("epoch="))
        assert len(committed) == LAST_EPOCH + 1
    assert actual_windows(pq.read_table(str(out))) == expected
    pairs = expected_pairs(spark, start_ms, LAST_EPOCH)
    assert len(pairs) > 1000
    assert actual_pairs(pq.read_table(str(pairs_out))) == pairs
    # A start sends the acks of every epoch kept in its log again: the last one's cover all.
    acks = printed_acks(final.stdout.splitlines())
    assert {a.request_id for a in acks} >= set(requests)
    assert all(a.status == "applied" for a in acks if a.request_id in requests)
    # Each request took effect once: in one epoch, however often it was acknowledged.
    applied = {(a.request_id, a.applied_epoch) for a in acks}
    assert len(applied) == len({a.request_id for a in acks})


def _wait_for_planned(epochs: Path, request_id: str, timeout_s: float) -> None:
    """Waits until an epoch's logged plan carries ``request_id``'s ack."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for plan in epochs.glob("*.plan.json"):
            try:
                acks = json.loads(plan.read_text()).get("acks", [])
            except (OSError, ValueError):
                continue  # being replaced
            if any(a.get("request_id") == request_id for a in acks):
                return
        time.sleep(0.01)
