"""``python -m bench.run_screens``: the README's run-page screenshots, taken on the real
product (a private stack, real drivers on Spark) with headless Chromium: the example job's run
page, its epochs and the instances of its keyed operator, and the page of a run that failed
(its job raises an error in every epoch, so the driver is restarted until the run fails).
Writes docs/screenshots/run-page.png, run-epochs.png, run-instances.png and run-failed.png."""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

from tests.webapp.private_stack import PrivateStack, wait_for

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "screenshots"
PASSWORD = "screens-12345678"


def _say(message: str) -> None:
    print(f"[run screens] {message}", file=sys.stderr, flush=True)


def _jobs() -> tuple[dict[str, Any], dict[str, Any]]:
    """The example job (into a memory sink, so it needs no table) and a copy whose map
    raises an error in every epoch."""
    example = json.loads((ROOT / "examples" / "campaign_views.json").read_text())
    example["name"] = "campaign-views-screens"
    example["operators"][-1] = {"id": "out", "type": "sink.memory", "params": {}}
    failing = copy.deepcopy(example)
    failing["name"] = "campaign-views-failing"
    failing["operators"].insert(2, {"id": "checked", "type": "map", "params": {
        "columns": {"campaign_id": "if(campaign_id >= 0, raise_error('campaign feed "
                                   "unavailable'), campaign_id)"}}})
    failing["edges"] = [{"from": "events", "to": "views"}, {"from": "views", "to": "checked"},
                        {"from": "checked", "to": "counts"}, {"from": "counts", "to": "out"}]
    return example, failing


def capture() -> None:
    """Runs both jobs on the product and saves the four screenshots."""
    from playwright.sync_api import sync_playwright

    example, failing = _jobs()
    with PrivateStack() as stack:
        api = stack.client(username="screens-api", role="admin")
        stack.manage("create_user", "screens", "--role", "operator", "--password", PASSWORD)
        runs = {}
        for dag in (example, failing):
            job = api.post("/api/jobs", dag)
            runs[dag["name"]] = api.post(f"/api/jobs/{job['id']}/runs", {})["run_id"]
        good, bad = runs[example["name"]], runs[failing["name"]]
        _say(f"runs {good} (example) and {bad} (failing) started")
        wait_for(lambda: (api.get(f"/api/runs/{good}").get("epoch") or -1) >= 40,
                 timeout=900, what="forty epochs of the example run", interval=2.0)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM,
                                                 args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{stack.url}/login/")
            page.fill("#id_username", "screens")
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.goto(f"{stack.url}/runs/{good}/")
            page.wait_for_selector("#live-state:has-text('live')", timeout=60_000)
            time.sleep(5)  # a few live epochs reach the charts
            page.screenshot(path=str(OUT / "run-page.png"))
            page.goto(f"{stack.url}/runs/{good}/epochs/")
            page.screenshot(path=str(OUT / "run-epochs.png"))
            page.goto(f"{stack.url}/runs/{good}/operators/counts/instances/")
            page.screenshot(path=str(OUT / "run-instances.png"))
            _say("the example run's pages saved; waiting for the failing run to fail")
            wait_for(lambda: api.get(f"/api/runs/{bad}")["status"] == "failed",
                     timeout=900, what="the failing run to fail", interval=2.0)
            page.goto(f"{stack.url}/runs/{bad}/")
            page.screenshot(path=str(OUT / "run-failed.png"))
            browser.close()
        api.post(f"/api/runs/{good}/stop", {})
    _say(f"saved run-page, run-epochs, run-instances and run-failed under {OUT}")


if __name__ == "__main__":
    capture()
