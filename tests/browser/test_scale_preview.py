"""A scale preview predicts what the change does from the measured epochs, in the terms the
graph is painted in: the bottleneck it names is the graph's, the run's capacity and the time
its backlog takes to drain change with the instances, and the policy's bound and its answer
agree."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import run_page_open

pytestmark = pytest.mark.browser


def _rate(text: str) -> float:
    number = re.match(r"([\d.]+)([kM]?)/s", text.strip())
    assert number, text
    return float(number.group(1)) * {"": 1, "k": 1e3, "M": 1e6}[number.group(2)]


def test_a_preview_predicts_from_the_measured_load_and_agrees_with_the_graph(fed_run, signed_in):
    run_id, _ = fed_run("predicts", 20)
    page = signed_in("operator")
    run_page_open(page, run_id)
    # Epochs published as a driver publishes them, enough for the preview's window.
    page.wait_for_function("Number(document.querySelector('#kpi-epoch').textContent) >= 26",
                           timeout=60_000)
    bottleneck = page.wait_for_selector(".run-node.bottleneck").get_attribute("data-operator")

    # + on the bottleneck: the preview names it, and predicts more capacity.
    page.click(f'[data-operator="{bottleneck}"] button.plus')
    page.wait_for_selector("[data-testid=preview-outlook]")
    outlook = page.locator("[data-testid=preview-outlook]")
    assert outlook.locator('[data-f="bottleneck-now"]').inner_text() == bottleneck
    now = _rate(outlook.locator('[data-f="capacity-now"]').inner_text())
    after = _rate(outlook.locator('[data-f="capacity-after"]').inner_text())
    assert after > now, (now, after)
    drains = [outlook.locator(f'[data-f="drain-{side}"]').inner_text() for side in ("now", "after")]
    assert all(re.fullmatch(r"[\d.]+ s|never \(it grows\)", d) for d in drains), drains
    preview = page.inner_text("[data-testid=scale-preview]")
    assert f"Predicted congested operators: {bottleneck}" in preview, preview
    page.click("#scale-cancel")

    # The policy's bound and its answer agree: what the page offers, the policy places.
    bounds = page.inner_text("#policy-bounds")
    offered = re.match(r"Up to (\d+) can be added", bounds)
    assert offered, bounds
    page.fill("#policy-instances", offered.group(1))
    page.click("[data-policy=scale_out]")
    page.wait_for_selector("[data-testid=scale-preview], #scale-preview [data-refused]")
    assert page.locator("#scale-preview [data-refused]").count() == 0, page.inner_text(
        "#scale-preview")
    assert bottleneck in page.inner_text("[data-testid=scale-preview] .changes")
