"""``python -m bench.screens``: the README's screenshots, taken on the real product (a
private stack, real drivers on Spark, headless Chromium): the editor, a live run's page, the
scaling preview, a failed run's page and History. The overloaded run's pair is
``bench.autoscale_screens``. Writes into docs/screenshots/ and prints what it saw."""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path
from typing import Any

from bench.browser import signed_in_page
from tests.webapp.private_stack import ApiClient, PrivateStack, wait_for
from webapp.demo_stream import DEMO_DAG

OUT = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
PASSWORD = "screens-12345678"


def campaign_counts() -> dict[str, Any]:
    """The demo job's graph, fed by the generator (skewed campaigns) instead of a stream."""
    dag = copy.deepcopy(DEMO_DAG)
    dag["name"] = "campaign-counts"
    dag["operators"][0] = {"id": "events", "type": "source.generator",
                           "params": {"rows_per_second": 5000, "keys": 1000, "skew": 0.8}}
    return dag


# Valid, parsed by Spark, and failing on the first row: Spark's ANSI mode refuses a
# division by zero at run time.
FAILING: dict[str, Any] = {
    "name": "ratio-per-campaign",
    "operators": [
        {"id": "events", "type": "source.generator", "params": {"rows_per_second": 1000}},
        {"id": "ratio", "type": "map",
         "params": {"columns": {"campaign_id": "campaign_id",
                                "ratio": "campaign_id / (campaign_id - campaign_id)"}}},
        {"id": "out", "type": "sink.postgres", "params": {"table": "campaign_ratio"}},
    ],
    "edges": [{"from": "events", "to": "ratio"}, {"from": "ratio", "to": "out"}],
}


def _say(message: str) -> None:
    print(f"[screens] {message}", file=sys.stderr, flush=True)


def _epoch(api: ApiClient, run_id: int) -> int:
    return int(api.get(f"/api/runs/{run_id}").get("epoch") or -1)


def _shot(page: Any, name: str) -> None:
    page.screenshot(path=str(OUT / name), full_page=False)
    _say(f"saved {OUT / name}")


def capture() -> None:
    """Runs the two jobs on the product and saves the screenshots."""
    with PrivateStack() as stack:
        api = stack.client(username="screens-api", role="admin")
        stack.manage("create_user", "screens", "--role", "admin",
                     env={"STREAMSCALE_USER_PASSWORD": PASSWORD})
        job = api.post("/api/jobs", campaign_counts())
        run_id = api.post(f"/api/jobs/{job['id']}/runs", {})["run_id"]
        failing = api.post("/api/jobs", FAILING)
        failed_id = api.post(f"/api/jobs/{failing['id']}/runs", {})["run_id"]
        _say(f"runs {run_id} (campaign-counts) and {failed_id} (failing) started")
        wait_for(lambda: _epoch(api, run_id) >= 20, timeout=600, what="twenty epochs")
        with signed_in_page(stack.url, "screens", PASSWORD) as page:
            _run_page_and_scaling(page, stack.url, run_id)
            page.goto(f"{stack.url}/jobs/{job['id']}/edit/")
            page.wait_for_selector('[data-operator="counts"]')
            page.click('[data-operator="counts"] .op-select')
            time.sleep(1)
            _shot(page, "editor.png")
            wait_for(lambda: api.get(f"/api/runs/{failed_id}")["status"] == "failed",
                     timeout=900, what="the failing run to fail")
            page.goto(f"{stack.url}/runs/{failed_id}/")
            time.sleep(2)
            _shot(page, "run-failed.png")
            page.goto(f"{stack.url}/history/")
            time.sleep(1)
            _shot(page, "history.png")
        api.post(f"/api/runs/{run_id}/stop", {})


def _run_page_and_scaling(page: Any, url: str, run_id: int) -> None:
    page.goto(f"{url}/runs/{run_id}/")
    page.wait_for_function("/^\\d+$/.test(document.querySelector('#kpi-epoch').textContent)",
                           timeout=120_000)
    time.sleep(8)  # a few live epochs on the charts
    _shot(page, "run-page.png")
    page.click('[data-operator="counts"] button.plus')
    page.wait_for_selector("[data-testid=scale-preview]")
    page.fill("#scale-reason", "skewed campaigns need more room")
    time.sleep(1)
    _shot(page, "scale-dialog.png")
    page.click("#scale-apply")
    page.wait_for_selector("#reconfigurations li[data-status=applied]", timeout=120_000)
    _say("the rescale to 3 instances was applied")


if __name__ == "__main__":
    capture()
