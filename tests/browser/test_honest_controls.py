"""What a person sees when things go wrong or cannot be done, in the browser: a failed run's
cause and restarts (live, without a reload) on its page, the job page and the job list; no
control the server would refuse; bounds shown and errors shown as their messages."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import api, run_page_open, screenshot

pytestmark = pytest.mark.browser

CAUSE = "the query failed: ParseException: syntax error at or near ';'"


def test_a_run_that_fails_shows_why_live_and_loses_its_controls(stack, fed_run, signed_in):
    run_id, job_id = fed_run("fails-live", 30)
    page = signed_in("operator")
    run_page_open(page, run_id)
    assert page.is_visible("#stop-open") and page.is_visible("[data-policy=scale_out]")
    assert page.locator("#run-failure").count() == 0

    stack.fake_run("fail", str(run_id))
    # No reload: the status event brings the cause, the restart and the end of controls.
    page.wait_for_selector("#run-failure", timeout=15_000)
    assert page.inner_text("#run-status") == "failed"
    cause = page.inner_text("[data-testid=failure-cause]")
    assert cause == (f"driver 4102 exited with code 1: {CAUSE}; 6 crashes, more than the "
                     "5 restarts allowed within 10 minutes")
    output = page.locator("#run-failure details pre")
    assert not output.is_visible()
    page.click("#run-failure details summary")
    assert "Traceback (most recent call last)" in output.inner_text()
    restarts = page.locator("#run-restarts li")
    assert restarts.count() == 1 and CAUSE in restarts.first.inner_text()
    for control in ("#stop-open", "[data-policy=scale_out]", "[data-policy=scale_in]"):
        assert not page.is_visible(control), control
    page.wait_for_selector("#autoscale-slot :text('nothing to scale')")
    assert page.locator("#autoscale-mode, [data-recommend-op], [data-rollback]").count() == 0
    assert page.get_attribute('[data-operator="counts"] button.plus', "aria-disabled") == "true"
    screenshot(page, "run-failed")

    page.reload()
    assert page.locator("#stop-open, [data-policy], #autoscale-mode").count() == 0
    assert CAUSE in page.inner_text("#run-failure")

    page.goto(f"/jobs/{job_id}/")
    head = page.inner_text("#job-run-state")
    assert "failed" in head and CAUSE in head and "not running" not in head
    page.goto("/")
    row = page.locator("tr", has=page.locator(f'a[href="/jobs/{job_id}/"]'))
    assert "failed" in row.inner_text() and CAUSE in row.inner_text()


def test_stop_asks_for_a_reason_and_the_control_goes_without_a_reload(fed_run, signed_in):
    run_id, _ = fed_run("stops-here", 10)
    page = signed_in("operator")
    run_page_open(page, run_id)
    page.click("#stop-open")
    page.wait_for_selector("#stop-dialog[open]")
    # Cancel leaves the run alone.
    page.click("#stop-cancel")
    assert page.inner_text("#run-status") == "running"
    page.click("#stop-open")
    page.click("#stop-confirm")
    assert page.evaluate("document.querySelector('#stop-reason').validity.valueMissing")
    assert page.get_attribute("#stop-reason", "maxlength") == "1000"
    page.fill("#stop-reason", "replaced by the next version")
    page.click("#stop-confirm")
    page.wait_for_selector("#stop-dialog", state="hidden")
    page.wait_for_function("document.querySelector('#run-status').textContent === 'stopping'")
    assert not page.is_visible("#stop-open")
    assert not page.is_visible("[data-policy=scale_out]")
    page.goto("/history/")
    assert "replaced by the next version" in page.inner_text("#history-rows")


def test_the_policy_field_has_the_server_s_bounds_and_refusals_read_as_sentences(
    fed_run, signed_in
):
    # No epochs yet: nothing measured, so nothing is offered, and the page says why.
    run_id, _ = fed_run("bounds-run", 0, feed=False)
    page = signed_in("operator")
    run_page_open(page, run_id)
    field = page.locator("#policy-instances")
    assert field.get_attribute("data-add-max") == "0"
    assert "None can be added now: no epoch has been measured yet" in page.inner_text(
        "#policy-bounds")
    assert page.is_disabled("[data-policy=scale_out]")
    assert page.is_disabled("[data-policy=scale_in]")
    assert page.get_attribute("[data-policy=scale_out]", "title").startswith(
        "Nothing is measured before the run's first epoch")
    # A sink's + is never offered as possible, and says why.
    plus = page.locator('[data-operator="out"] button.plus')
    assert plus.get_attribute("aria-disabled") == "true"
    assert "cannot change live" in plus.get_attribute("title")

    # Measured: the bound is what the policy would place, and more is refused in a sentence.
    run_id, _ = fed_run("bounds-measured", 20, feed=False)
    run_page_open(page, run_id)
    add_max = int(field.get_attribute("max"))
    assert add_max == int(field.get_attribute("data-add-max")) and 0 < add_max < 500
    field.fill("500")
    assert page.is_disabled("[data-policy=scale_out]")
    assert page.is_disabled("[data-policy=scale_in]")
    problem = page.inner_text("#policy-problem")
    assert problem == f"Instances: at most {add_max} can be added now."
    field.fill(str(add_max + 1))
    assert page.get_attribute("[data-policy=scale_out]", "title") == (
        f"Instances: at most {add_max} can be added now.")
    field.fill("1")
    assert not page.is_visible("#policy-problem") and page.is_enabled("[data-policy=scale_out]")
    page.click("[data-policy=scale_out]")
    preview = page.wait_for_selector("[data-testid=scale-preview]").inner_text()
    assert "instances of" in preview, preview
    page.click("#scale-cancel")


DAG = {
    "name": "taken-name", "key_groups": 16,
    "operators": [
        {"id": "events", "type": "source.generator", "params": {"rows_per_second": 100}},
        {"id": "out", "type": "sink.memory", "params": {}},
    ],
    "edges": [{"from": "events", "to": "out"}],
}


def test_the_editor_shows_bounds_and_the_server_s_messages(signed_in, tmp_path):
    # The save below is refused on purpose (409): the browser logs it.
    page = signed_in("editor", expected_errors=("status of 409",))
    assert api(page, "POST", "/api/jobs", DAG)["status"] == 201
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto("/jobs/new/")
    # The name field holds at most what the server accepts, and says so.
    page.fill("#doc-name", "n" * 250)
    assert len(page.input_value("#doc-name")) == 200
    assert "at most 200 characters" in page.inner_text(".doc-fields")
    # A numeric param shows its bound and a value above it is refused, naming both.
    draft = tmp_path / "draft.json"
    too_fast = json.loads(json.dumps(DAG))
    too_fast["operators"][0]["params"]["rows_per_second"] = 10**20
    draft.write_text(json.dumps(too_fast))
    page.set_input_files("#import-file", str(draft))
    page.click('[data-operator="events"] .op-select')
    assert page.get_attribute("#param-events-rows_per_second", "max") == "10000000"
    assert "at most 10,000,000" in page.inner_text("#param-events-rows_per_second-hint")
    page.wait_for_selector('[data-operator="events"] .problem-badge:not([hidden])')
    assert ("param 'rows_per_second': must be at most 10,000,000"
            in page.inner_text('[data-operator="events"] .node-problem'))

    page.fill("#param-events-rows_per_second", "100")
    page.fill("#doc-name", "taken-name")
    page.wait_for_function("document.querySelector('#validity').textContent === 'valid'")
    page.click("#save")
    page.wait_for_function(
        "document.querySelector('#save-status').textContent.startsWith('Not saved')")
    status = page.inner_text("#save-status")
    assert status == "Not saved: a job named 'taken-name' already exists; choose another name."
    assert page.locator("#conflict:not([hidden])").count() == 0
    assert not any("/api/jobs/null" in url for url in requests), requests


def test_a_long_reason_does_not_widen_history(fed_run, signed_in):
    run_id, _ = fed_run("long-reason", 0, feed=False)
    page = signed_in("operator", expected_errors=("status of 400",))  # the refused stop
    page.goto("/")
    reason = "x" * 1000  # the longest a stop reason may be, with no place to break
    answer = api(page, "POST", f"/api/runs/{run_id}/stop", {"reason": reason})
    assert answer["status"] == 202, answer
    too_long = api(page, "POST", f"/api/runs/{run_id}/stop", {"reason": "y" * 20_000})
    assert too_long["status"] == 400 and "at most 1000" in too_long["body"]["error"]
    page.goto("/history/")
    page.wait_for_selector("#history-rows td.reason")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
