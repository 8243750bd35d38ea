"""The whole product end to end: a private stack (web server, Celery worker and beat, embedded
Postgres and Redis) runs a job on Spark through the API; the test watches it over the websocket,
rescales it, repeats a request, sends conflicting ones, kills the driver during a reconfiguration,
stops it, and checks the sink against results computed from the generator."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from tests.engine.runtime.jobs import window_job
from tests.webapp.driver_kills import driver_pid
from tests.webapp.private_stack import LiveFeed, PrivateStack, wait_for
from tests.webapp.sink_check import check_sink_is_exact

pytestmark = pytest.mark.spark

TABLE = "e2e_counts"


@pytest.fixture(scope="module")
def stack():
    # Its own job only: a demo run on Spark beside it would take CPU from the run it times.
    with PrivateStack(demo=False) as private:
        yield private


def _kill_driver(stack: PrivateStack, run_id: int) -> None:
    # This stack's driver: other stacks on the machine have runs of the same ids.
    pid = driver_pid(stack, run_id)
    assert pid is not None, f"no driver process for run {run_id}"
    os.killpg(os.getpgid(pid), signal.SIGKILL)


def _settled(api, reconfiguration_id: int) -> dict | None:
    record = api.get(f"/api/reconfigurations/{reconfiguration_id}")
    return record if record["status"] in ("applied", "rejected", "failed") else None


def _running_past(api, run_id: int, epoch: int):
    run = api.get(f"/api/runs/{run_id}")
    return run if run["status"] == "running" and (run["epoch"] or -1) > epoch else None


def _rescale(api, run_id: int, parallelism: int, request_id: str) -> tuple[int, dict]:
    return api.call("POST", f"/api/runs/{run_id}/reconfigurations", {
        "kind": "rescale", "operator": "counts", "parallelism": parallelism,
        "reason": "end-to-end test", "request_id": request_id})


def test_a_job_runs_rescales_recovers_and_stops_with_exact_results(stack, spark):
    api = stack.client(username="e2e", role="admin")
    document = window_job({"type": "sink.postgres", "params": {"table": TABLE}}, parallelism=2)
    job = api.post("/api/jobs", document)
    run_id = api.post(f"/api/jobs/{job['id']}/runs", {})["run_id"]
    feed = LiveFeed(stack, api.token, run_id)
    try:
        run = wait_for(lambda: _running_past(api, run_id, 1), timeout=300, what="a running run")
        assert feed.of_type("snapshot") and feed.of_type("run.epoch")
        # The keyed operator's state traffic, as its instances measured it, epoch by epoch.
        epochs = api.get(f"/api/runs/{run_id}/metrics?since_epoch=0")["epochs"]
        traffic = [e["operators"]["counts"] for e in epochs]
        assert all(t["state_bytes_read"] is not None for t in traffic), traffic
        assert any(t["state_bytes_written"] > 0 for t in traffic), traffic
        assert any("counts" in e["metrics"]["st"] for e in feed.of_type("run.epoch"))

        # A rescale is applied at an epoch boundary, moves no state, and reaches the browser.
        status, answer = _rescale(api, run_id, 3, "e2e-first")
        assert status == 202
        applied = wait_for(lambda: _settled(api, answer["id"]), timeout=120, what="the rescale")
        assert applied["status"] == "applied" and applied["state_bytes_moved"] == 0
        assert applied["applied_epoch"] >= run["epoch"]
        assert api.get(f"/api/runs/{run_id}")["parallelism"]["counts"] == 3
        wait_for(lambda: any(m["ops"]["counts"][0] == 3
                             for m in (e["metrics"] for e in feed.of_type("run.epoch"))),
                 timeout=60, what="an epoch with 3 instances on the websocket")
        assert any(e["reconfiguration"] == answer["id"] and e["status"] == "applied"
                   for e in feed.of_type("reconfiguration.status"))

        # The same request id applies once.
        again_status, again = _rescale(api, run_id, 3, "e2e-first")
        assert again_status == 202 and again["id"] == answer["id"] and again["created"] is False

        # Conflicting requests from two clients: both recorded, applied one after the other.
        other = stack.client(username="e2e-other", role="operator")
        results: dict[str, tuple[int, dict]] = {}
        threads = [threading.Thread(target=lambda c=c, n=n, r=r: results.__setitem__(
            r, _rescale(c, run_id, n, r))) for c, n, r in
            [(api, 5, "e2e-conflict-a"), (other, 2, "e2e-conflict-b")]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        records = [wait_for(lambda rid=body["id"]: _settled(api, rid), timeout=120,
                            what="a conflicting rescale") for _, body in results.values()]
        assert all(r["status"] == "applied" for r in records)
        # Both may take effect at one epoch boundary, in the order their commands reached the
        # driver (two clients' sends race after their commits); the run then records what the
        # driver acknowledged last, and its plan says the same.
        last = max(records, key=lambda r: r["applied_epoch"])
        settled = api.get(f"/api/runs/{run_id}")["parallelism"]["counts"]
        if sum(r["applied_epoch"] == last["applied_epoch"] for r in records) == 1:
            assert settled == (5 if last["request_id"] == "e2e-conflict-a" else 2)
        assert settled in (5, 2)

        # Kill the driver during a reconfiguration: the run recovers and the change settles.
        epoch = api.get(f"/api/runs/{run_id}")["epoch"]
        _, during = _rescale(api, run_id, 4, "e2e-during-kill")
        _kill_driver(stack, run_id)
        wait_for(lambda: api.get(f"/api/runs/{run_id}")["status"] == "recovering", timeout=30,
                 what="the run to be marked recovering")
        settled = wait_for(lambda: _settled(api, during["id"]), timeout=300,
                           what="the interrupted reconfiguration to settle")
        assert settled["status"] in ("applied", "failed")
        wait_for(lambda: _running_past(api, run_id, epoch + 2), timeout=300,
                 what="the run to run again")

        api.post(f"/api/runs/{run_id}/stop", {"reason": "end of test"})
        stopped = wait_for(lambda: (lambda r: r if r["status"] == "stopped" else None)(
            api.get(f"/api/runs/{run_id}")), timeout=120, what="the run to stop")
        assert stopped["restarts"] >= 1
    finally:
        feed.close()

    history = api.get(f"/api/jobs/{job['id']}/history")["entries"]
    actions = [entry["action"] for entry in history]
    assert actions.count("reconfiguration.rescale") == 4  # the repeated request id is not new
    assert "run.recovering" in actions and "run.stopped" in actions

    check_sink_is_exact(spark, stack, TABLE, run_id, stopped["epoch"])
