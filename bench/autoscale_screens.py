"""``python -m bench.autoscale_screens``: screenshots of the run page on an overloaded run,
before and after the autoscaler acted, taken on the real product (a private stack, a real
driver on Spark) with headless Chromium. Writes docs/screenshots/autoscale-before.png and
autoscale-after.png and prints what it saw."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from bench.autoscale import overload_job
from bench.browser import signed_in_page
from tests.webapp.private_stack import PrivateStack, wait_for

OUT = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
PASSWORD = "screens-12345678"


def _say(message: str) -> None:
    print(f"[autoscale screens] {message}", file=sys.stderr, flush=True)


def capture(rate: int = 60_000) -> None:
    """Runs the overloaded job on the product and saves the two screenshots."""
    dag = overload_job(rate)
    dag["operators"][0]["params"]["max_rows_per_epoch"] = rate
    with PrivateStack() as stack:
        api = stack.client(username="screens-api", role="admin")
        stack.manage("create_user", "screens", "--role", "operator",
                     env={"STREAMSCALE_USER_PASSWORD": PASSWORD})
        job = api.post("/api/jobs", dag)
        run_id = api.post(f"/api/jobs/{job['id']}/runs", {})["run_id"]
        _say(f"run {run_id} started at {rate} rows/s offered")
        wait_for(lambda: (api.get(f"/api/runs/{run_id}").get("epoch") or -1) >= 5,
                 timeout=600, what="five epochs")
        with signed_in_page(stack.url, "screens", PASSWORD) as page:
            page.goto(f"{stack.url}/runs/{run_id}/")
            page.wait_for_selector(".run-node.bottleneck", timeout=120_000)
            time.sleep(2)  # the charts fill in
            # The mark follows each epoch's figures: take the picture while it is shown.
            page.wait_for_selector(".run-node.bottleneck", timeout=120_000)
            page.screenshot(path=str(OUT / "autoscale-before.png"), full_page=False)
            _say("before: the bottleneck is painted red")
            api.post(f"/api/runs/{run_id}/autoscale",
                     {"mode": "auto", "min": 1, "max": 2, "cooldown_s": 10})
            wait_for(lambda: api.get(f"/api/runs/{run_id}")["parallelism"].get("counts") == 2,
                     timeout=600, what="the autoscaler to scale counts up")
            _say("the autoscaler scaled counts to 2; waiting for the backlog to shrink")
            time.sleep(30)
            page.screenshot(path=str(OUT / "autoscale-after.png"), full_page=False)
        api.post(f"/api/runs/{run_id}/stop", {})
    _say(f"saved {OUT / 'autoscale-before.png'} and {OUT / 'autoscale-after.png'}")


if __name__ == "__main__":
    capture(int(sys.argv[1]) if len(sys.argv) > 1 else 60_000)
