"""An operator previews the data of a real run from its page: selects an operator in the graph,
presses Preview data and sees the rows that operator emitted, with their column names, as the
run's Spark driver answered; a window aggregate's rows come once one of its windows closes."""

from __future__ import annotations

import time

import pytest

from bench.workload import chain_job, views_filter, window_count
from tests.browser.conftest import api, run_page_open, screenshot, wait_running

pytestmark = pytest.mark.browser

ANSWER_TIMEOUT_MS = 90_000


def _job(name: str) -> dict:
    """generator -> views (a filter) -> counts (a window aggregate of 2 s) -> memory sink."""
    counts = window_count(1, window="2 seconds", watermark="1 second",
                          aggregates={"views": "count(*)"})
    source = {"id": "events", "type": "source.generator",
              "params": {"rows_per_second": 200, "keys": 20}}
    return chain_job(name, [source, views_filter(), counts,
                            {"id": "out", "type": "sink.memory", "params": {}}], key_groups=16)


def _preview(page, operator: str) -> list[dict[str, str]]:
    """Select ``operator`` in the graph, press Preview data and wait for its rows."""
    page.locator(f".node[data-operator={operator}] .op-id").click()
    page.wait_for_function(
        f"document.querySelector('#operator-drill').dataset.operator === '{operator}'")
    page.get_by_role("button", name="Preview data").click()
    page.wait_for_selector("#drill-sample .sample-rows", timeout=ANSWER_TIMEOUT_MS)
    return page.locator("#drill-sample .sample-rows").evaluate(
        """table => {
             const names = [...table.tHead.rows[0].cells].map((c) => c.textContent);
             return [...table.tBodies[0].rows].map((r) => Object.fromEntries(
               [...r.cells].map((c, i) => [names[i], c.textContent])));
           }""")


def test_an_operator_previews_the_rows_an_operator_emitted(stack, signed_in):
    page = signed_in("operator")
    page.goto("/")
    job = api(page, "POST", "/api/jobs", _job(f"preview-{int(time.time())}"))["body"]
    run_id = api(page, "POST", f"/api/jobs/{job['id']}/runs", {})["body"]["run_id"]
    try:
        page.goto(f"/runs/{run_id}/")
        wait_running(page, stack, run_id)
        run_page_open(page, run_id)

        views = _preview(page, "views")
        assert 0 < len(views) <= 20
        assert {"event_type", "campaign_id", "event_time"} <= set(views[0])
        assert {row["event_type"] for row in views} == {"view"}  # what the filter let through
        message = page.inner_text("#drill-sample [data-sample=message]")
        assert message.startswith(f"{len(views)} rows views emitted in epoch ")
        screenshot(page.locator("#operator-drill"), "data-preview")

        # Another operator: the preview shown goes, the window aggregate's rows come.
        counts = _preview(page, "counts")
        assert list(counts[0]) == ["campaign_id", "window_start", "window_end", "views"]
        assert all(int(row["views"]) >= 1 for row in counts)
    finally:
        api(page, "POST", f"/api/runs/{run_id}/stop", {"reason": "end of the preview test"})
