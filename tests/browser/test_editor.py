"""The editor's guard against lost work: a version saved meanwhile by someone else is announced
live, and saving on a stale base shows the conflict instead of overwriting. Also: validation
problems appear on the operators they concern, and the version diff shows both sides."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import api, screenshot
from webapp.api.schema import EXAMPLE_DAG

pytestmark = pytest.mark.browser

DAG = {**EXAMPLE_DAG, "name": "conflict-demo"}  # the API's documented example


def test_a_concurrent_save_is_shown_as_a_conflict_and_never_overwritten(signed_in):
    mine, theirs = signed_in("editor"), signed_in("admin")
    created = api(theirs, "POST", "/api/jobs", DAG)
    assert created["status"] == 201, created
    job_id = created["body"]["id"]

    mine.goto(f"/jobs/{job_id}/edit/")
    mine.wait_for_function("document.querySelector('#validity').textContent === 'valid'")
    # A problem shows on the operator it concerns, and goes when fixed.
    mine.click('[data-operator="views"] .op-select')
    mine.fill("#param-views-condition", "")
    badge = mine.wait_for_selector('[data-operator="views"] .problem-badge:not([hidden])')
    assert badge.inner_text() == "1"
    assert "condition" in mine.inner_text('[data-operator="views"] .node-problem')
    assert mine.is_disabled("#save")
    mine.fill("#param-views-condition", "event_type = 'click'")
    mine.wait_for_function("document.querySelector('#validity').textContent === 'valid'")

    newer = json.loads(json.dumps(DAG))
    newer["operators"][0]["params"]["rows_per_second"] = 500
    saved = api(theirs, "POST", f"/api/jobs/{job_id}/versions",
                 {"dag": newer, "base_version": 1, "comment": "faster source"})
    assert saved["status"] == 201, saved
    banner = mine.wait_for_selector("#conflict:not([hidden])").inner_text()
    assert "Version 2 was saved by admin-b" in banner and "faster source" in banner

    mine.fill("#save-comment", "clicks instead")
    mine.click("#save")
    mine.wait_for_function(
        "document.querySelector('#save-status').textContent.includes('Not saved')")
    assert "someone saved a newer version" in mine.inner_text("#save-status")
    screenshot(mine, "editor-conflict")
    job = theirs.evaluate(f"fetch('/api/jobs/{job_id}').then((r) => r.json())")
    assert job["latest_version"] == 2  # nothing overwritten, nothing added

    mine.click(f'#conflict a[href="/jobs/{job_id}/diff/?a=1&b=2"]')
    mine.wait_for_selector("[data-testid=version-diff]")
    assert "rows_per_second of events" in mine.inner_text("main") or \
        "params of events changed: rows_per_second" in mine.inner_text("main")
    assert mine.locator("tr.diff-replace").count() >= 1


def test_export_and_import_round_trip(signed_in, tmp_path):
    page = signed_in("editor")
    page.goto("/jobs/new/")
    imported = dict(DAG, name="imported-job")
    path = tmp_path / "job.json"
    path.write_text(json.dumps(imported))
    page.set_input_files("#import-file", str(path))
    page.wait_for_function("document.querySelector('#validity').textContent === 'valid'")
    assert page.locator(".editor-node").count() == 3
    assert page.input_value("#doc-name") == "imported-job"
    with page.expect_download() as download:
        page.click("#export")
    exported = json.loads(open(download.value.path()).read())
    assert exported["operators"] == imported["operators"] and exported["edges"] == imported["edges"]


def test_undo_redo_keys_and_the_choices_offered(signed_in):
    page = signed_in("editor")
    page.goto("/jobs/new/")
    page.wait_for_selector("#validity")
    # A blank job is not valid: it says what is missing rather than "no problems".
    page.wait_for_function("document.querySelector('#validity').textContent === 'empty'")
    assert "the job has no operators" in page.inner_text("#problems")
    assert page.is_disabled("#undo") and page.is_disabled("#redo")

    page.click('.palette-item[data-type="source.generator"]')
    page.click('.palette-item[data-type="filter"]')
    page.click('.palette-item[data-type="sink.memory"]')
    assert page.locator(".editor-node").count() == 3
    # "Feeds" offers neither a source nor what the operator feeds already.
    page.click('[data-operator="generator"] .op-select')
    options = page.locator("#connect-to option").all_inner_texts()
    assert "generator" not in options and "filter" not in options and "memory" in options

    page.click("body", position={"x": 5, "y": 5})
    page.keyboard.press("Control+z")
    assert page.locator(".editor-node").count() == 2
    page.keyboard.press("Control+z")
    assert page.locator(".editor-node").count() == 1
    page.keyboard.press("Control+Shift+z")
    page.keyboard.press("Control+y")
    assert page.locator(".editor-node").count() == 3
    assert page.is_disabled("#redo") and not page.is_disabled("#undo")

    # Delete removes the selected operator with its edges; the Undo button brings both back.
    page.click('[data-operator="filter"] .op-select')
    page.keyboard.press("Delete")
    assert page.locator(".editor-node").count() == 2
    assert page.locator("#editor-graph path.edge").count() == 0
    page.click("#undo")
    assert page.locator(".editor-node").count() == 3
    assert page.locator("#editor-graph path.edge").count() == 2


def test_removing_one_of_two_repeated_edges_keeps_the_other(signed_in, tmp_path):
    page = signed_in("editor")
    page.goto("/jobs/new/")
    repeated = dict(DAG, name="repeated-edge")
    repeated["edges"] = DAG["edges"] + [{"from": "views", "to": "out"}]
    path = tmp_path / "job.json"
    path.write_text(json.dumps(repeated))
    page.set_input_files("#import-file", str(path))
    page.wait_for_selector(".editor-node")
    page.click('[data-operator="out"] .op-select')
    removes = page.locator('.edge-list button[aria-label="Remove edge views to out"]')
    assert removes.count() == 2
    removes.first.click()
    assert page.locator('.edge-list button[aria-label="Remove edge views to out"]').count() == 1
    with page.expect_download() as download:
        page.click("#export")
    exported = json.loads(open(download.value.path()).read())
    assert exported["edges"].count({"from": "views", "to": "out"}) == 1
