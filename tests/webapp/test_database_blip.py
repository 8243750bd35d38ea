"""A database blip is not a crash: the embedded PostgreSQL killed (-9) three times under a
running job with a Postgres sink, the launcher starts it again each time, and the run's one
driver waits each restart out: no restart spent, the sink exact."""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from tests.engine.runtime.jobs import window_job
from tests.webapp.driver_kills import driver_pid
from tests.webapp.private_stack import PrivateStack, wait_for
from tests.webapp.sink_check import check_sink_is_exact

pytestmark = pytest.mark.spark

TABLE = "blip_counts"
KILLS = 3


def _postmaster_pid(stack: PrivateStack) -> int | None:
    try:
        pid = int((stack.var_dir / "postgres/data/postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if psutil.pid_exists(pid) else None


def _run(api, run_id: int) -> dict | None:
    """The run, or None while the API answers 503 (the database restarting)."""
    status, body = api.call("GET", f"/api/runs/{run_id}")
    return body if status == 200 else None


def _past(api, run_id: int, epoch: int) -> dict | None:
    run = _run(api, run_id)
    return run if run and run["status"] == "running" and (run["epoch"] or -1) > epoch else None


def test_postgres_killed_three_times_spends_no_driver_restart_and_output_is_exact(spark):
    with PrivateStack(demo=False, standby=False) as stack:
        api = stack.client(username="blip", role="admin")
        document = window_job({"type": "sink.postgres", "params": {"table": TABLE}},
                              parallelism=2)
        job = api.post("/api/jobs", document)
        run_id = api.post(f"/api/jobs/{job['id']}/runs", {})["run_id"]
        run = wait_for(lambda: _past(api, run_id, 1), timeout=300, what="a running run")
        driver = driver_pid(stack, run_id)
        assert driver  # the same process to the end

        for _ in range(KILLS):
            postmaster = _postmaster_pid(stack)
            assert postmaster is not None
            os.kill(postmaster, signal.SIGKILL)
            wait_for(lambda old=postmaster: _postmaster_pid(stack) not in (None, old),
                     timeout=60, what="the launcher to start PostgreSQL again")
            # Epochs committed after the restart: the sink got past the lost connections.
            run = wait_for(lambda e=run["epoch"]: _past(api, run_id, e + 2), timeout=180,
                           what="epochs after the database came back")

        assert driver_pid(stack, run_id) == driver
        log = (stack.var_dir / "runs" / str(run_id) / "driver.log").read_text(errors="replace")
        assert "lost the sink database" in log  # a blip hit a write, and it was retried
        api.post(f"/api/runs/{run_id}/stop", {"reason": "end of test"})
        stopped = wait_for(lambda: (lambda r: r if r and r["status"] == "stopped" else None)(
            _run(api, run_id)), timeout=120, what="the run to stop")
        assert stopped["restarts"] == 0
        check_sink_is_exact(spark, stack, TABLE, run_id, stopped["epoch"])
