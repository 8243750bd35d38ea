"""The warm standby driver on the whole product: a run's start and its restart after a kill are
taken over by a driver whose Spark is already up, a new standby follows once the run runs, a
standby of another environment is stopped, and stopping the product leaves none behind."""

from __future__ import annotations

import psutil
import pytest

from tests.engine.runtime.jobs import window_job
from tests.webapp.driver_kills import driver_kill, driver_pid, standbys_ready, successor_epoch
from tests.webapp.private_stack import PrivateStack, wait_for
from tests.webapp.sink_check import check_sink_is_exact

pytestmark = pytest.mark.spark

TIMEOUT_S = 600.0  # Spark's start on a busy machine


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_start_and_restart_are_taken_over_by_standbys_and_none_outlives_the_product(
    spark,
) -> None:
    stack = PrivateStack(demo=False).start()
    try:
        api = stack.client(username="standby", role="admin")
        first = wait_for(lambda: standbys_ready(stack), timeout=TIMEOUT_S, what="a warm standby")
        [(token, standby)] = first.items()

        table = "standby_counts"
        job = api.post("/api/jobs", window_job(
            {"type": "sink.postgres", "params": {"table": table}}, parallelism=2),
            timeout=TIMEOUT_S)
        run_id = api.post(f"/api/jobs/{job['id']}/runs", {})["run_id"]
        wait_for(lambda: api.get(f"/api/runs/{run_id}")["epoch"] is not None,
                 timeout=TIMEOUT_S, what="a first epoch")
        assert driver_pid(stack, run_id) == standby
        log = (stack.var_dir / "runs" / str(run_id) / "driver.log").read_text()
        assert "taken over by a warm standby driver" in log

        # Once the run runs, a new standby waits for the next start or restart.
        second = wait_for(lambda: {t: p for t, p in standbys_ready(stack).items() if t != token},
                          timeout=TIMEOUT_S, what="a second standby")
        [(_, successor)] = second.items()
        killed_at = driver_kill(stack, run_id)
        successor_epoch(api, run_id, restarts=0, killed_at=killed_at, timeout=TIMEOUT_S)
        assert driver_pid(stack, run_id) == successor
        # The killed driver's exit is recorded for its run: the restart names the kill.
        run = api.get(f"/api/runs/{run_id}")
        assert run["restarts"] == 1

        api.post(f"/api/runs/{run_id}/stop", {"reason": "end of test"})
        stopped = wait_for(lambda: (lambda r: r if r["status"] == "stopped" else None)(
            api.get(f"/api/runs/{run_id}")), timeout=TIMEOUT_S, what="the run to stop")
        check_sink_is_exact(spark, stack, table, run_id, stopped["epoch"])
        third = wait_for(lambda: standbys_ready(stack), timeout=TIMEOUT_S, what="a third standby")
    finally:
        stack.stop()
    assert [pid for pid in (standby, successor, *third.values()) if _alive(pid)] == []


def test_a_standby_of_another_environment_is_stopped_and_replaced() -> None:
    with PrivateStack(demo=False) as stack:
        [(token, pid)] = wait_for(lambda: standbys_ready(stack), timeout=TIMEOUT_S,
                                  what="a warm standby").items()
        # As if the product's environment had changed since the standby started.
        (stack.var_dir / "standby" / token / "env").write_text("another environment")
        wait_for(lambda: not _alive(pid), timeout=60, what="the standby to be stopped")
        [(new_token, _)] = wait_for(lambda: standbys_ready(stack), timeout=TIMEOUT_S,
                                    what="a new standby").items()
        assert new_token != token
        wait_for(lambda: not (stack.var_dir / "standby" / token).exists(), timeout=60,
                 what="the old standby's folder to be cleared")
