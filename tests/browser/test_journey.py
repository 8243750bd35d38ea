"""The whole journey on the real path: build a job in the editor from nothing (an invalid edge is
rejected with its message), save it, start it (Celery launches a real Spark driver), watch the
numbers change live, press + on the keyed operator, see the new instance count and the history
entry, roll back, and find both entries in History."""

from __future__ import annotations

import time

import pytest

from tests.browser.conftest import FIRST_EPOCH_TIMEOUT_MS, screenshot, wait_running

pytestmark = pytest.mark.browser

APPLY_TIMEOUT_MS = 90_000


def _add(page, operator_type: str, fields: dict[str, str]) -> str:
    page.click(f'.palette-item[data-type="{operator_type}"]')
    operator_id = page.input_value("#op-id")
    for name, value in fields.items():
        page.fill(f"#param-{operator_id}-{name}", value)
    return operator_id


def _wait_valid(page) -> None:
    page.wait_for_function("document.querySelector('#validity').textContent === 'valid'")


def build_job(page, name: str) -> None:
    page.goto("/jobs/new/")
    page.fill("#doc-name", name)
    _add(page, "source.generator", {"rows_per_second": "300", "keys": "50"})
    _add(page, "filter", {"condition": "event_type = 'view'"})
    keyed = _add(page, "window_aggregate", {
        "key": "campaign_id", "time": "event_time", "window": "10 seconds",
        "watermark": "5 seconds", "aggregates": "views: count(*)"})
    page.fill("#op-parallelism", "2")
    _add(page, "sink.memory", {})
    assert keyed == "window_aggregate"
    _wait_valid(page)
    assert page.locator("#editor-graph path.edge").count() == 3


def reject_invalid_edge(page) -> None:
    page.click('[data-operator="window_aggregate"] .op-select')
    # The inspector does not offer a source to feed; drawing the edge on the canvas is refused.
    assert "generator" not in page.locator("#connect-to option").all_inner_texts()
    page.click('[data-operator="window_aggregate"] .connect')
    page.click('[data-operator="generator"] .op-select')
    message = page.wait_for_selector("#edge-message:not([hidden])").inner_text()
    assert "rejected" in message and "cannot have inputs" in message, message
    assert page.locator("#editor-graph path.edge").count() == 3
    _wait_valid(page)


def _instances(page) -> str:
    return page.inner_text('[data-operator="window_aggregate"] .instances')


def _apply(page, reason: str) -> None:
    page.wait_for_selector("[data-testid=scale-preview]")
    page.fill("#scale-reason", reason)
    page.click("#scale-apply")
    page.wait_for_selector("#scale-outcome [data-reconfiguration-requested]")


def test_build_start_watch_scale_roll_back_and_review(stack, signed_in):
    page = signed_in("operator")
    name = f"journey-{int(time.time())}"
    build_job(page, name)
    reject_invalid_edge(page)
    screenshot(page, "editor")
    page.fill("#save-comment", "first cut")
    page.click("#save")
    page.wait_for_url("**/jobs/*/?version=1")
    job_id = int(page.url.split("/jobs/")[1].split("/")[0])
    assert "first cut" in page.inner_text("main")

    page.click("text=Start v1")
    page.wait_for_url("**/runs/*/")
    run_id = int(page.url.rstrip("/").split("/")[-1])
    page.evaluate("window.__samePage = true")
    try:
        wait_running(page, stack, run_id)
        page.wait_for_function("/^\\d+$/.test(document.querySelector('#kpi-epoch').textContent)",
                               timeout=FIRST_EPOCH_TIMEOUT_MS)
        first = int(page.inner_text("#kpi-epoch"))
        page.wait_for_function(
            f"Number(document.querySelector('#kpi-epoch').textContent) > {first}",
            timeout=60_000)
        assert page.inner_text('[data-operator="generator"] [data-f="out"]') != "—"
        assert _instances(page) == "2"

        page.click('[data-operator="window_aggregate"] button.plus')
        _apply(page, "more room for the windows")
        page.wait_for_function(
            "document.querySelector('[data-operator=\"window_aggregate\"] .instances')"
            ".textContent === '3'", timeout=APPLY_TIMEOUT_MS)
        page.wait_for_selector("#reconfigurations li[data-status=applied]",
                               timeout=APPLY_TIMEOUT_MS)

        page.click("#reconfigurations [data-rollback]")
        _apply(page, "undo the scale-out")
        page.wait_for_function(
            "document.querySelector('[data-operator=\"window_aggregate\"] .instances')"
            ".textContent === '2'", timeout=APPLY_TIMEOUT_MS)
        assert page.evaluate("window.__samePage === true")  # all of it live, no reload

        page.goto(f"/history/?job={job_id}")
        rows = page.inner_text("#history-rows")
        assert "reconfiguration.rescale" in rows and "more room for the windows" in rows
        assert "reconfiguration.rollback" in rows and "undo the scale-out" in rows
    finally:
        page.goto(f"/runs/{run_id}/")
        if page.locator("#stop-open").count():
            page.click("#stop-open")
            page.fill("#stop-reason", "end of the journey")
            page.click("#stop-confirm")
            page.wait_for_function(
                "['stopped', 'failed'].includes(document.querySelector('#run-status').textContent)",
                timeout=60_000)
