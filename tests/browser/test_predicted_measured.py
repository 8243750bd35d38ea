"""A person scales the bottleneck after reading the preview, then opens History: the change
shows what the preview predicted beside what the epochs after it measured, and a change the
model cannot predict says it has no prediction."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import history_entry, reconfigure, screenshot
from tests.browser.test_reconfiguration_pages import _applied, _wait_epoch

pytestmark = pytest.mark.browser

RATE = re.compile(r"^[\d.]+[kM]?/s$")


def test_history_shows_the_prediction_beside_the_measured_epochs(fed_run_opened):
    page, run_id, job_id = fed_run_opened("predicted-measured", 20)
    _wait_epoch(page, 26)  # the preview's window of epochs, measured
    bottleneck = page.wait_for_selector(".run-node.bottleneck").get_attribute("data-operator")
    page.click(f'[data-operator="{bottleneck}"] button.plus')
    page.wait_for_selector("[data-testid=preview-outlook]")
    promised = page.inner_text('[data-testid=preview-outlook] [data-f="capacity-after"]')
    page.fill("#scale-reason", "the bottleneck needs room")
    page.click("#scale-apply")
    _applied(page, "rescale")
    applied_at = int(page.inner_text("#kpi-epoch"))
    reconfigure(page, run_id, kind="logic", operator="clean",
                params={"condition": "campaign_id > 0"})
    _wait_epoch(page, applied_at + 7)  # the epochs after it, measured

    page.goto(f"/history/?job={job_id}")
    scaled = history_entry(page, "reconfiguration.rescale")
    scaled.locator("summary").click()
    table = scaled.locator("[data-testid=predicted-measured]")
    assert "Predicted when requested" in table.locator("caption").inner_text()
    capacity = table.locator("tr[data-figure=capacity] td").all_inner_texts()
    # Predicted as the preview said it, measured from the epochs after the change.
    assert capacity[0] == promised and RATE.match(capacity[1]), capacity
    throughput = table.locator("tr[data-figure=throughput] td").all_inner_texts()
    assert all(RATE.match(cell) for cell in throughput), throughput
    drain = table.locator('tr[data-figure="backlog drained in"] td').all_inner_texts()
    assert all(re.fullmatch(r"[\d.]+ s|never \(it grows\)", d) for d in drain), drain
    etp = table.locator(f'tr[data-figure="ETP of {bottleneck}"] td').all_inner_texts()
    assert all(re.fullmatch(r"[01]\.\d\d", cell) for cell in etp), etp
    screenshot(scaled, "history-prediction")

    changed = history_entry(page, "reconfiguration.logic")
    changed.locator("summary").click()
    assert changed.locator("[data-testid=no-prediction]").inner_text().startswith(
        "No prediction was kept with this change")
