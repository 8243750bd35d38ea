"""The run page of a windowed job, whose sinks get rows only when a window closes: figures over
a window of epochs that neither read 0 between closes nor flicker, each keyed operator's
watermark and how far it is behind; and the run's views a user of Flink's web UI looks for
(epochs, a keyed operator's instances, exceptions and restarts), reached from the run page."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.browser.conftest import REPO, screenshot
from tests.browser.fake_windowed import CLOSE_EVERY

pytestmark = pytest.mark.browser


def _windowed_run(stack, name: str):
    created = subprocess.run(
        [sys.executable, "-m", "tests.browser.fake_windowed", "create", name], cwd=REPO,
        env=stack.env, capture_output=True, text=True, timeout=300, check=True)
    run_id, job_id = created.stdout.split()
    feeder = stack.start("-m", "tests.browser.fake_windowed", "feed", run_id, "0.4")
    return int(run_id), int(job_id), feeder


def _epoch(page) -> int:
    text = page.inner_text("#kpi-epoch")
    return int(text) if text.isdigit() else -1


def _wait_epoch(page, at_least: int) -> int:
    page.wait_for_function(
        f"Number(document.querySelector('#kpi-epoch').textContent) >= {at_least}",
        timeout=30_000)
    return _epoch(page)


def test_a_windowed_job_s_figures_hold_between_window_closes(stack, signed_in):
    run_id, _, feeder = _windowed_run(stack, "windowed-figures")
    page = signed_in("viewer")
    try:
        page.goto(f"/runs/{run_id}/")
        _wait_epoch(page, CLOSE_EVERY + 1)
        # Sample the figures in the epochs between closes, where per-epoch values are 0.
        seen = []
        while len(seen) < 6:
            epoch = _epoch(page)
            figures = page.evaluate("""() => ({
                epoch: document.querySelector('#kpi-epoch').textContent,
                out: document.querySelector('#kpi-out').textContent,
                p50: document.querySelector('#kpi-p50').textContent,
                p99: document.querySelector('#kpi-p99').textContent,
                etp: document.querySelector('[data-operator="counts"] [data-f="etp"]').textContent,
                grey: !document.querySelector('[data-operator="counts"]').style
                        .getPropertyValue('--etp') ||
                      Number(document.querySelector('[data-operator="counts"]').style
                        .getPropertyValue('--etp')) === 0,
            })""")
            if int(figures["epoch"]) % CLOSE_EVERY:
                seen.append(figures)
            _wait_epoch(page, epoch + 1)
        for figures in seen:
            assert figures["out"] not in ("0.0/s", "—/s"), seen
            rate = float(figures["out"].removesuffix("/s"))
            assert 0 < rate <= 500 / CLOSE_EVERY * 1.01, seen  # a mean, never the burst
            assert figures["p50"] == "8000 ms" and figures["p99"] == "9500 ms", seen
            assert figures["etp"] not in ("0.00", "—") and not figures["grey"], seen
        assert "over the last 30 epochs" in page.inner_text("#smoothing-note").replace("\n", " ")
        # The watermark of the keyed operator, and how far it is behind.
        row = page.locator('[data-watermark="counts"]')
        assert re.fullmatch(r"\d\d:\d\d:\d\d UTC", row.locator('[data-f="watermark"]').inner_text())
        assert row.locator('[data-f="delay"]').inner_text() == "7000 ms"
        assert row.locator('[data-f="lag"]').inner_text() == "5000 ms"
        assert row.locator('[data-f="state-read"]').inner_text() == "1.2 MB"
        assert row.locator('[data-f="state-written"]').inner_text() == "890 B"
        assert "behind the clock" in page.inner_text('[data-operator="counts"] .node-note')
        # A shorter window: the page says so and the figures follow.
        page.select_option("#smoothing-epochs", "10")
        assert "over the last 10 epochs" in page.inner_text("#smoothing-note").replace("\n", " ")
        assert "over the last 10 epochs" in page.inner_text(".charts")
        screenshot(page, "run-windowed", full_page=False)
    finally:
        feeder.terminate()


def test_epochs_instances_and_exceptions_are_reached_from_the_run_page(stack, signed_in):
    run_id, _, feeder = _windowed_run(stack, "windowed-views")
    page = signed_in("viewer")
    try:
        page.goto(f"/runs/{run_id}/")
        _wait_epoch(page, 3)
        page.click("nav.run-views >> text=Epochs")
        page.wait_for_url(re.compile(rf"/runs/{run_id}/epochs/$"))
        first = page.locator("[data-testid=epochs] tbody tr").first
        assert int(first.get_attribute("data-epoch")) >= 3
        assert "committed" in first.inner_text()

        page.click("nav.run-views >> text=Instances of counts")
        page.wait_for_selector("#operator-instances")
        assert page.inner_text("[data-testid=instance-count]") == "2"
        busiest = page.locator('[data-testid=instances] tr[data-instance="0"]').inner_text()
        assert "8" in busiest and "30%" in busiest and "75%" in busiest  # key groups, busy, rows
        assert page.inner_text("[data-testid=rows-skew]") == "1.50×"
        assert page.locator("[data-testid=timeline] tbody tr").count() >= 3

        page.click("nav.run-views >> text=Exceptions and restarts")
        page.wait_for_selector("#no-incidents")
    finally:
        feeder.terminate()
    failing, _ = stack.fake_run("create", "0", "windowed-failing").split()
    stack.fake_run("fail", failing)
    page.goto(f"/runs/{failing}/exceptions/")
    assert "ParseException" in page.inner_text("[data-testid=failure-cause]")
    assert page.locator("#run-restarts li").count() == 1
    output = page.locator("#run-failure details.driver-output")
    assert not output.evaluate("d => d.open")
    output.locator("summary").click()
    assert "Traceback" in output.locator("pre").inner_text()
    screenshot(page, "run-exceptions", full_page=False)
