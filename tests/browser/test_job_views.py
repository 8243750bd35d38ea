"""The job-level views in the browser: finding jobs with the list's search and filters (kept in
the URL), archiving and restoring a job (and what an archived job no longer offers), the job's
runs, the autoscaler's bounds on the run page, and a missing page with the navigation."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import screenshot

pytestmark = pytest.mark.browser

JOBS_SETUP = """
import copy
from tests.browser.fake_run import TEN_OPERATORS
from webapp.jobs.models import Trigger
from webapp.jobs.services import job_create
for name in {names!r}:
    job_create(dag=dict(copy.deepcopy(TEN_OPERATORS), name=name), actor=None,
               trigger=Trigger.USER)
"""


def _jobs(stack, *names: str) -> None:
    stack.shell(JOBS_SETUP.format(names=list(names)))


def _listed(page) -> list[str]:
    return page.locator("#job-table tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.job)")


def test_jobs_are_found_archived_and_restored(stack, signed_in):
    _jobs(stack, "jv-alpha", "jv-beta")
    running_run, running_job = stack.fake_run("create", "0", "jv-gamma").split()
    editor = signed_in("editor")

    editor.goto("/")
    editor.fill("#job-search", "jv-")
    editor.select_option("#job-state", "idle")
    editor.click("#job-filters button[type=submit]")
    editor.wait_for_url(re.compile(r"\?q=jv-&state=idle&archived=hide$"))
    assert _listed(editor) == ["jv-alpha", "jv-beta"]
    editor.select_option("#job-state", "running")
    editor.click("#job-filters button[type=submit]")
    editor.wait_for_url(re.compile(r"state=running"))
    assert _listed(editor) == ["jv-gamma"]
    screenshot(editor, "job-list-filtered")

    # A job with a run going offers Archive disabled, with the reason.
    editor.goto(f"/jobs/{running_job}/")
    assert editor.is_disabled("#job-archive-open")
    assert editor.inner_text("#archive-refused") == (
        f"Run {running_run} is running: stop it before archiving the job.")

    editor.goto("/?q=jv-alpha")
    editor.click("#job-table a:text('jv-alpha')")
    editor.click("#job-archive-open")
    editor.fill("#archive-reason", "superseded by jv-beta")
    editor.click("#job-archive-confirm")
    editor.wait_for_selector("#job-archived-note")
    assert "cannot be started or edited" in editor.inner_text("#job-archived-note")
    assert editor.locator(".head-actions a:text('Edit')").count() == 0
    assert editor.is_visible("#job-restore")
    screenshot(editor, "job-archived")

    editor.goto("/?q=jv-")
    assert _listed(editor) == ["jv-beta", "jv-gamma"]
    editor.select_option("#job-archived", "only")
    editor.click("#job-filters button[type=submit]")
    editor.wait_for_url(re.compile(r"archived=only"))
    assert _listed(editor) == ["jv-alpha"]
    assert editor.inner_text("#job-table tr[data-job=jv-alpha] .badge") == "archived"
    alpha = editor.get_attribute("#job-table a:text('jv-alpha')", "href")

    operator = signed_in("operator")
    operator.goto(alpha)
    assert operator.locator("#version-panel button:text('Start')").count() == 0
    assert operator.inner_text("#start-refused") == "Archived: restore the job to start it."

    history = signed_in("viewer")
    history.goto("/history/?action=job.archived")
    assert "superseded by jv-beta" in history.inner_text("#history-rows")

    editor.goto(alpha)
    editor.click("#job-restore")
    editor.wait_for_selector(".head-actions a:text('Edit')")
    assert editor.locator("#job-archived-note").count() == 0
    operator.reload()
    assert operator.is_visible("#version-panel button:text('Start v1')")


def test_the_job_page_lists_its_runs_with_the_failure_cause(stack, signed_in):
    failed_run, job_id = stack.fake_run("create", "0", "jv-runs").split()
    stack.fake_run("fail", failed_run)
    running_run = stack.fake_run("create", "0", "jv-runs").split()[0]
    page = signed_in("viewer")
    page.goto(f"/jobs/{job_id}/")
    rows = page.locator("#job-runs tbody tr")
    assert rows.count() == 2
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.run)") == [running_run, failed_run]
    failed = page.locator(f"#job-runs tr[data-run='{failed_run}']")
    assert failed.locator(".status").inner_text() == "failed"
    cause = failed.locator("td.cause").inner_text()
    assert cause.startswith("driver 4102 exited with code 1: the query failed: ParseException")
    assert "Traceback" not in cause
    assert page.locator(f"#job-runs tr[data-run='{running_run}'] .status").inner_text() == \
        "running"
    failed.locator("a").click()
    page.wait_for_url(f"**/runs/{failed_run}/")
    page.wait_for_selector("#run-failure")


def test_the_autoscaler_bounds_are_set_and_refusals_shown(stack, signed_in):
    run_id, _ = stack.fake_run("create", "0", "jv-autoscale").split()
    page = signed_in("operator")
    page.goto(f"/runs/{run_id}/")
    # The ten-operator job has 64 key groups: the form offers no more.
    assert page.get_attribute("#autoscale-max", "max") == "64"
    assert page.get_attribute("#autoscale-min", "max") == "64"
    page.fill("#autoscale-min", "2")
    page.fill("#autoscale-max", "5")
    page.fill("#autoscale-cooldown", "30")
    page.click("#autoscale-save")
    page.wait_for_selector("#autoscale-summary:text('From 2 to 5 instances per operator')")
    assert "waits 30 s" in page.inner_text("#autoscale-summary")

    page.fill("#autoscale-min", "6")
    page.fill("#autoscale-max", "3")
    page.click("#autoscale-save")
    alert = page.wait_for_selector("#autoscale [role=alert]").inner_text()
    assert alert == "Max must not be below min (6)"
    assert page.input_value("#autoscale-max") == "3"  # kept, to be corrected
    assert "From 2 to 5 instances" in page.inner_text("#autoscale-summary")

    page.select_option("#autoscale-mode", "recommend")
    page.wait_for_selector("#autoscale-mode option[value=recommend][selected]", state="attached")
    page.reload()
    assert page.input_value("#autoscale-mode") == "recommend"
    assert (page.input_value("#autoscale-min"), page.input_value("#autoscale-max"),
            page.input_value("#autoscale-cooldown")) == ("2", "5", "30")
    screenshot(page, "autoscale-bounds", full_page=False)


def test_a_missing_page_keeps_the_navigation(stack, signed_in):
    page = signed_in("viewer", expected_errors=("status of 404",))
    response = page.goto("/jobs/999999/")
    assert response.status == 404
    assert page.inner_text("[role=alert]") == "There is no job 999999."
    page.click("nav[aria-label=Main] a:text('Jobs')")
    page.wait_for_url(stack.url)
