"""Stop and resume with state on the whole product: a window job on Spark is stopped while
its windows are open, resumed from its kept state, then moved to a state-safe new version of
the job from its state; the sink holds every window exactly once, those open at each stop
with rows from both sides. An upgrade that would misplace the state is refused naming the
parameter, and a discarded state cannot be resumed."""

from __future__ import annotations

import copy

import pytest

from tests.engine.runtime.jobs import window_job
from tests.webapp.private_stack import PrivateStack, wait_for
from tests.webapp.sink_check import check_sink_is_exact

pytestmark = pytest.mark.spark

TABLE = "resumed_counts"


def _status(api, run_id: int, status: str) -> dict | None:
    run = api.get(f"/api/runs/{run_id}")
    return run if run["status"] == status else None


def _running_past(api, run_id: int, epoch: int) -> dict | None:
    run = api.get(f"/api/runs/{run_id}")
    return run if run["status"] == "running" and (run["epoch"] or -1) > epoch else None


def _stop(api, run_id: int) -> dict:
    api.post(f"/api/runs/{run_id}/stop", {"reason": "resume test"})
    return wait_for(lambda: _status(api, run_id, "stopped"), timeout=120, what="the stop")


def _checked(api, document: dict) -> bool:
    """Whether the product's check passes ``document``. The web server's expression parser
    starts a JVM of its own: on a busy machine the first checks outlast the client's wait or
    the check's budget, and a check has no side effect, so the caller asks again."""
    try:
        return api.call("POST", "/api/validate", document)[0] == 200
    except TimeoutError:
        return False


def _version_with(api, job: dict, document: dict, **counts_params) -> int:
    changed = copy.deepcopy(document)
    counts = next(op for op in changed["operators"] if op["id"] == "counts")
    counts["params"].update(counts_params)
    base = api.get(f"/api/jobs/{job['id']}")["latest_version"]
    return api.post(f"/api/jobs/{job['id']}/versions",
                    {"dag": changed, "base_version": base})["version"]


def test_a_run_stopped_mid_window_resumes_and_upgrades_from_its_state_exactly(spark):
    with PrivateStack(demo=False) as stack:
        api = stack.client(username="resumer", role="operator")
        document = window_job({"type": "sink.postgres", "params": {"table": TABLE}})
        wait_for(lambda: _checked(api, document), timeout=300, what="the parser to answer")
        job = api.post("/api/jobs", document)
        run_id = api.post(f"/api/jobs/{job['id']}/runs", {})["run_id"]
        wait_for(lambda: _running_past(api, run_id, 2), timeout=300, what="a running run")
        first = _stop(api, run_id)
        # Windows are 4 s long and epochs 1 s: some were open at the stop, their rows kept.
        assert first["state"]["kept"] and first["state"]["entries"] > 0, first["state"]
        assert first["state"]["bytes"] > 0

        resumed = api.call("POST", f"/api/runs/{run_id}/resume", {})
        assert resumed == (202, {"run_id": run_id, "status": "starting"})
        wait_for(lambda: _running_past(api, run_id, first["epoch"] + 3), timeout=300,
                 what="the resumed run to run on")
        second = _stop(api, run_id)
        check_sink_is_exact(spark, stack, TABLE, run_id, second["epoch"])

        misplacing = _version_with(api, job, document, key=["user_id"])
        status, refused = api.call("POST", f"/api/runs/{run_id}/resume",
                                   {"version": misplacing})
        assert status == 409 and refused["problems"][0]["where"] == "operator counts"
        assert refused["problems"][0]["message"].startswith("param key changed")

        later_watermark = _version_with(api, job, document, watermark="2 seconds")
        status, _ = api.call("POST", f"/api/runs/{run_id}/resume", {"version": later_watermark})
        assert status == 202
        wait_for(lambda: _running_past(api, run_id, second["epoch"] + 3), timeout=300,
                 what="the upgraded run to run on")
        third = _stop(api, run_id)
        assert third["version"] == later_watermark
        check_sink_is_exact(spark, stack, TABLE, run_id, third["epoch"])

        assert api.call("DELETE", f"/api/runs/{run_id}/state")[0] == 200
        status, refused = api.call("POST", f"/api/runs/{run_id}/resume", {})
        assert status == 409 and "its state was discarded" in refused["error"]
        actions = [e["action"] for e in api.get(f"/api/jobs/{job['id']}/history")["entries"]]
        for action in ("run.resumed", "run.upgraded", "run.state_discarded"):
            assert actions.count(action) == 1, actions
