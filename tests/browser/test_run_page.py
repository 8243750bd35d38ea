"""The run page against the running stack with runs whose epochs the test publishes through
the driver's own path (`run_epoch_publish`) and whose reconfigurations it acknowledges through
the control channel, as a driver does: size and speed with ten operators and an hour of
metrics, and one-click scaling with rollback and history."""

from __future__ import annotations

import re
import statistics
import time

import pytest

from tests.browser.conftest import run_page_open, screenshot

pytestmark = pytest.mark.browser

LONG_TASKS = """
window.__longTasks = [];
new PerformanceObserver((list) => list.getEntries().forEach(
  (e) => window.__longTasks.push({start: e.startTime, duration: e.duration}))
).observe({type: "longtask", buffered: true});
"""


def _epoch(page) -> int:
    text = page.inner_text("#kpi-epoch")
    return int(text) if text.isdigit() else -1


def test_run_page_stays_responsive_with_ten_operators_and_an_hour_of_metrics(fed_run, signed_in):
    run_id, _ = fed_run("ten-ops-hour", 3600)
    page = signed_in("viewer")
    page.add_init_script(LONG_TASKS)
    frames: list[str] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(payload)))
    started = time.monotonic()
    page.goto(f"/runs/{run_id}/")
    page.wait_for_function(
        "Number(document.querySelector('#chart-latency').dataset.points) >= 3600")
    load_s = time.monotonic() - started
    loaded_at = page.evaluate("performance.now()")
    first = _epoch(page)
    page.wait_for_function(
        f"Number(document.querySelector('#kpi-epoch').textContent) >= {first + 5}",
        timeout=30_000)
    assert page.locator(".run-node").count() == 10
    # Decimated: about two points per pixel, not 3600.
    drawn = int(page.get_attribute("#chart-throughput", "data-drawn"))
    assert drawn <= 2 * page.locator("#chart-throughput").bounding_box()["width"] + 1
    # A viewer is not offered controls it may not use.
    assert page.locator("button.step").count() == 0
    assert page.locator("#scale-dialog").count() == 0
    assert page.inner_text("#run-status") == "running"
    assert page.inner_text("#live-state") == "live"
    long_tasks = [t for t in page.evaluate("window.__longTasks") if t["start"] > loaded_at]
    epochs = [f for f in frames if f.startswith('{"type":"run.epoch"')]
    sizes = [len(f.encode()) for f in epochs]
    assert len(sizes) >= 5 and statistics.mean(sizes) < 1200, sizes
    snapshot = next(f for f in frames if f.startswith('{"type":"snapshot"'))
    print(f"\nrun page, 10 operators, 3600 epochs: loaded in {load_s:.2f} s; "
          f"websocket run.epoch {statistics.mean(sizes):.0f} bytes/epoch "
          f"(min {min(sizes)}, max {max(sizes)}); snapshot {len(snapshot.encode())} bytes; "
          f"long tasks during live updates: {[round(t['duration']) for t in long_tasks]}")
    assert load_s < 10
    assert all(t["duration"] < 200 for t in long_tasks), long_tasks


def _scale_dialog_apply(page, reason: str) -> None:
    page.wait_for_selector("[data-testid=scale-preview]")
    # The reason is required: without it the form does not submit.
    page.click("#scale-apply")
    assert page.evaluate("document.querySelector('#scale-reason').validity.valueMissing")
    page.fill("#scale-reason", reason)
    page.click("#scale-apply")
    page.wait_for_selector("#scale-outcome [data-reconfiguration-requested]")
    page.wait_for_selector("#scale-dialog", state="hidden")


def _instances(page, operator: str) -> str:
    return page.inner_text(f'[data-operator="{operator}"] .instances')


def test_one_click_scale_out_rollback_and_history_on_a_fed_run(fed_run, signed_in):
    run_id, job_id = fed_run("scale-fed", 900)
    page = signed_in("operator")
    run_page_open(page, run_id)
    assert _instances(page, "counts") == "2"
    # Sources can grow; a sink cannot change live, and its controls say why.
    minus = page.locator('[data-operator="out"] button.minus')
    assert minus.get_attribute("aria-disabled") == "true"
    assert minus.get_attribute("title") == (
        "out cannot change live: it writes in the stage that feeds it, whose parallelism "
        "it follows")
    # Keyboard: focus + on the keyed operator and press Enter.
    page.focus('[data-operator="counts"] button.plus')
    page.keyboard.press("Enter")
    preview = page.wait_for_selector("[data-testid=scale-preview]")
    assert "instances of counts: 2 -> 3" in preview.inner_text()
    assert "ETP AFTER" in preview.inner_text().upper()
    screenshot(page, "scale-dialog", full_page=False)
    _scale_dialog_apply(page, "counts is congested")
    page.wait_for_function(
        "document.querySelector('[data-operator=\"counts\"] .instances').textContent === '3'",
        timeout=30_000)
    page.wait_for_selector("#reconfigurations li[data-status=applied]", timeout=30_000)
    assert re.search(r"applied at epoch \d+", page.inner_text("#reconfigurations"))
    screenshot(page, "run-page")

    page.click("#reconfigurations [data-rollback]")
    preview = page.wait_for_selector("[data-testid=scale-preview]")
    assert "instances of counts: 3 -> 2" in preview.inner_text()
    _scale_dialog_apply(page, "back to the previous plan")
    page.wait_for_function(
        "document.querySelector('[data-operator=\"counts\"] .instances').textContent === '2'",
        timeout=30_000)
    page.wait_for_function(
        "document.querySelectorAll('#reconfigurations li[data-status=applied]').length === 2",
        timeout=30_000)
    # The markers of both changes are on the charts' time axis.
    assert page.evaluate("document.querySelector('#kpi-epoch').textContent") != "—"

    page.goto("/history/")
    page.select_option("select[name=job]", str(job_id))
    # The rows of every job are on the page until htmx swaps in this job's selection.
    page.wait_for_selector(
        f"#history-rows[data-job='{job_id}'] [data-action='reconfiguration.rollback']")
    rows = page.inner_text("#history-rows")
    assert "reconfiguration.rescale" in rows and "counts is congested" in rows
    assert "back to the previous plan" in rows
    rescale = page.locator("#history-rows tr[data-action='reconfiguration.rescale']")
    rescale.locator("summary").click()
    assert "instances of counts: 2 -> 3" in rescale.inner_text(), rescale.inner_text()
    assert f"job={job_id}" in page.get_attribute("#csv-link", "href")
    with page.expect_download() as download:
        page.click("#csv-link")
    csv_text = open(download.value.path()).read()
    assert "reconfiguration.rollback" in csv_text and "reconfiguration.rescale" in csv_text
    screenshot(page, "history")


def test_scale_out_by_the_policy_previews_the_plan_and_prediction(fed_run, signed_in):
    run_id, _ = fed_run("policy-fed", 20)
    page = signed_in("admin")
    run_page_open(page, run_id)
    # As many as the policy places now (the page's bound), given to the congested operator.
    page.fill("#policy-instances", page.get_attribute("#policy-instances", "data-add-max"))
    page.click("[data-policy=scale_out]")
    preview = page.wait_for_selector("[data-testid=scale-preview]").inner_text()
    assert "instances of" in preview and "Predicted congested operators" in preview
    page.click("#scale-cancel")
    page.select_option("#autoscale-mode", "recommend")
    page.wait_for_selector("#autoscale-mode option[value=recommend][selected]",
                           state="attached")
    page.reload()  # the mode is stored: the page renders it from the run
    assert page.input_value("#autoscale-mode") == "recommend"
