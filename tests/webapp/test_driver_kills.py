"""One driver per run under repeated kills: a run's driver killed (-9, the driver process
alone, its JVM left to the product) at random moments of its epochs, while its successor's
Spark starts, and in the middle of a rescale. Every restart is spent on a kill (none on a
successor meeting a predecessor still alive), the run never fails, and its sink is exact.
``bench recovery`` kills more drivers, and times each recovery."""

from __future__ import annotations

import random
import time

import pytest

from tests.engine.runtime.jobs import window_job
from tests.webapp.driver_kills import (
    driver_jvm,
    driver_kill,
    driver_pid,
    epochs_after,
    restarts_not_on_a_kill,
    successor_epoch,
)
from tests.webapp.private_stack import PrivateStack, wait_for
from tests.webapp.sink_check import check_sink_is_exact

pytestmark = pytest.mark.spark

TABLE = "kill_counts"
# A recovery is a successor's whole start (its JVM, its SparkSession, its first epoch), two
# for the kill of a starting successor: ``bench recovery`` times it; a busy machine takes
# many times what a quiet one does, and a tighter bound would fail a product that recovers.
RECOVERY_TIMEOUT_S = 900.0
KILLS = 3
SETTLED = ("applied", "rejected", "failed")


def _restarts(api, run_id: int) -> int:
    return api.get(f"/api/runs/{run_id}")["restarts"]


def test_drivers_killed_at_random_moments_spend_one_restart_each_and_output_is_exact(spark):
    rng = random.Random(1)
    with PrivateStack(demo=False) as stack:
        api = stack.client(username="kills", role="admin")
        document = window_job({"type": "sink.postgres", "params": {"table": TABLE}},
                              parallelism=2)
        job = api.post("/api/jobs", document, timeout=RECOVERY_TIMEOUT_S)
        run_id = api.post(f"/api/jobs/{job['id']}/runs", {})["run_id"]
        wait_for(lambda: epochs_after(api, run_id, -1, 0.0), timeout=RECOVERY_TIMEOUT_S,
                 what="a first epoch")

        # At a random moment of an epoch (epochs start a second apart).
        time.sleep(rng.random() * 2.0)
        killed = driver_pid(stack, run_id)
        killed_at = driver_kill(stack, run_id)
        # Its successor, killed while its Spark starts (its JVM is up, its query is not).
        successor = wait_for(lambda: (lambda p: p if p not in (None, killed) else None)(
            driver_pid(stack, run_id)), timeout=RECOVERY_TIMEOUT_S, what="a successor",
            interval=0.05)
        wait_for(lambda: driver_jvm(successor), timeout=RECOVERY_TIMEOUT_S,
                 what="the successor's JVM", interval=0.05)
        assert not epochs_after(api, run_id, -1, killed_at)
        driver_kill(stack, run_id)
        successor_epoch(api, run_id, restarts=1, killed_at=killed_at,
                        timeout=RECOVERY_TIMEOUT_S)

        # In the middle of a rescale: the request is in, the next epoch applies it.
        restarts = _restarts(api, run_id)
        status, rescale = api.call("POST", f"/api/runs/{run_id}/reconfigurations", {
            "kind": "rescale", "operator": "counts", "parallelism": 3, "reason": "kill test",
            "request_id": "kill-mid-rescale"})
        assert status == 202, rescale
        time.sleep(rng.random())
        killed_at = driver_kill(stack, run_id)
        successor_epoch(api, run_id, restarts=restarts, killed_at=killed_at,
                        timeout=RECOVERY_TIMEOUT_S)
        settled = wait_for(lambda: (lambda r: r if r["status"] in SETTLED else None)(
            api.get(f"/api/reconfigurations/{rescale['id']}")), timeout=RECOVERY_TIMEOUT_S,
            what="the rescale to settle")
        assert settled["status"] == "applied", settled

        api.post(f"/api/runs/{run_id}/stop", {"reason": "end of test"})
        stopped = wait_for(lambda: (lambda r: r if r["status"] in ("stopped", "failed") else None)(
            api.get(f"/api/runs/{run_id}")), timeout=RECOVERY_TIMEOUT_S, what="the run to stop")
        assert stopped["status"] == "stopped", stopped["failure_reason"]
        assert restarts_not_on_a_kill(api, job["id"]) == []
        assert stopped["restarts"] == KILLS
        log = (stack.var_dir / "runs" / str(run_id) / "driver.log").read_text(errors="replace")
        assert "CONCURRENT" not in log and "concurrently" not in log
        assert "superseded" not in log  # no driver ever met a successor's fence
        check_sink_is_exact(spark, stack, TABLE, run_id, stopped["epoch"])
