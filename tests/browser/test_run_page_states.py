"""The run page in every state it can be in: it fits the common screen widths, its live parts
follow the server (the plan's version in the heading, the autoscaler cooling down), an ended
run is not shown as live, a run before its first epoch says what it is doing, says that its
charts have nothing yet, and offers no change measured on nothing."""

from __future__ import annotations

import copy

import pytest

from tests.browser.conftest import api, htmx_settled, run_page_open
from tests.browser.fake_run import TEN_OPERATORS
from tests.browser.test_reconfiguration_pages import _applied

pytestmark = pytest.mark.browser

WIDTHS = (1280, 1366, 1440, 1920)


def test_the_run_page_fits_each_common_width(fed_run, signed_in):
    run_id, _ = fed_run("fits-width", 30)
    page = signed_in("operator")
    run_page_open(page, run_id)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        overflow = page.evaluate("[document.documentElement.scrollWidth,"
                                 " document.documentElement.clientWidth]")
        assert overflow[0] <= overflow[1], (width, overflow)
        card = page.locator("#autoscale").bounding_box()
        for control in ("#autoscale-min", "#autoscale-max", "#autoscale-cooldown",
                        "#autoscale-save"):
            box = page.locator(control).bounding_box()
            assert box["x"] + box["width"] <= card["x"] + card["width"], (width, control)


def _autoscale_recommends_with_cooldown(page, cooldown_s: int) -> None:
    page.select_option("#autoscale-mode", "recommend")
    page.wait_for_selector("#autoscale-form input[name=mode][value=recommend]", state="attached")
    htmx_settled(page)
    page.fill("#autoscale-cooldown", str(cooldown_s))
    page.click("#autoscale-save")
    page.wait_for_selector(f"#autoscale-summary:has-text('waits {cooldown_s} s')")
    htmx_settled(page)


def test_the_heading_and_the_autoscaler_follow_a_move_without_a_reload(fed_run, signed_in):
    run_id, job_id = fed_run("follows-server", 30)
    page = signed_in("operator")
    run_page_open(page, run_id)
    _autoscale_recommends_with_cooldown(page, 3600)
    assert page.locator("[data-testid=plan-version]").count() == 0

    newer = copy.deepcopy(TEN_OPERATORS)
    newer["name"] = "follows-server"
    next(op for op in newer["operators"] if op["id"] == "counts")["parallelism"] = 3
    saved = api(page, "POST", f"/api/jobs/{job_id}/versions",
                {"dag": newer, "base_version": 1, "comment": "three counters"})
    assert saved["status"] == 201, saved
    moved = api(page, "POST", f"/api/runs/{run_id}/reconfigurations",
                {"kind": "rollback", "to_version": 2, "reason": "move to v2"})
    assert moved["status"] in (200, 201, 202), moved
    _applied(page, "rollback to v2")

    # No reload: the heading names the plan now run, and the autoscaler says it waits.
    page.wait_for_selector("[data-testid=plan-version]:text-is('plan of v2')")
    waiting = page.wait_for_selector("[data-testid=autoscale-waiting]").inner_text()
    assert "cooling down after the change applied at epoch" in waiting, waiting
    assert "No change recommended" not in page.inner_text("#autoscale")


def test_an_ended_run_is_not_shown_live(stack, fed_run, signed_in):
    run_id, _ = fed_run("ends-here", 10)
    page = signed_in("viewer")
    run_page_open(page, run_id)
    stack.fake_run("fail", str(run_id))
    page.wait_for_function("document.querySelector('#run-status').textContent === 'failed'")
    page.wait_for_function("document.querySelector('#live-state').dataset.state === 'ended'")
    assert page.inner_text("#live-state") == "not live: the run is failed"
    assert "on" not in page.get_attribute("#live-state", "class").split()

    page.reload()
    page.wait_for_selector("body[data-snapshot]", state="attached")
    page.wait_for_function("document.querySelector('#live-state').dataset.state === 'ended'")
    assert "live" != page.inner_text("#live-state")


SET_STATUS = """
from webapp.jobs.models import Run
Run.objects.filter(pk={run_id}).update(status="{status}", current_epoch=None)
"""

RECOVER = """
from webapp.runs.services import run_status_set
run_status_set(run_id={run_id}, status="recovering", output="",
               detail="driver 4101 exited with code 1; restarting from the checkpoint")
"""


def test_a_run_before_its_first_epoch_says_what_it_does_and_offers_no_change(
        stack, fed_run, signed_in):
    run_id, _ = fed_run("not-yet", 0, feed=False)
    stack.shell(SET_STATUS.format(run_id=run_id, status="starting"))
    page = signed_in("operator")
    run_page_open(page, run_id)

    progress = page.wait_for_selector("#run-progress:not([hidden])").inner_text()
    assert progress.startswith("Starting:") and "s so far" in progress, progress
    assert page.locator(".chart-empty:not([hidden])").count() == 2
    assert "No epochs yet" in page.inner_text(".charts .chart-block")
    plus = page.locator('[data-operator="counts"] button.plus')
    assert plus.get_attribute("aria-disabled") == "true"
    assert "not finished an epoch" in plus.get_attribute("title")
    assert page.is_disabled("[data-policy=scale_out]")

    # Recovering before any epoch finished: still nothing to scale by.
    stack.shell(RECOVER.format(run_id=run_id))
    page.wait_for_function("document.querySelector('#run-status').textContent === 'recovering'")
    page.wait_for_function(
        "document.querySelector('#run-progress').textContent.startsWith('Recovering')")
    assert plus.get_attribute("aria-disabled") == "true"
    assert page.is_disabled("[data-policy=scale_out]")
