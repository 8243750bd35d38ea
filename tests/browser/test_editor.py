"""The editor's guard against lost work: a version saved meanwhile by someone else is announced
live, and saving on a stale base shows the conflict instead of overwriting. Also: validation
problems appear on the operators they concern, and the version diff shows both sides."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import screenshot

pytestmark = pytest.mark.browser

DAG = {
    "name": "conflict-demo", "key_groups": 16,
    "operators": [
        {"id": "events", "type": "source.generator", "params": {"rows_per_second": 100}},
        {"id": "views", "type": "filter", "params": {"condition": "event_type = 'view'"}},
        {"id": "out", "type": "sink.memory", "params": {}},
    ],
    "edges": [{"from": "events", "to": "views"}, {"from": "views", "to": "out"}],
}


def _api(page, method: str, path: str, body: dict) -> dict:
    return page.evaluate(
        """async ([method, path, body]) => {
             const csrf = JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRFToken"];
             const r = await fetch(path, {method, body: JSON.stringify(body),
               headers: {"Content-Type": "application/json", "X-CSRFToken": csrf}});
             return {status: r.status, body: await r.json()};
           }""", [method, path, body])


def test_a_concurrent_save_is_shown_as_a_conflict_and_never_overwritten(signed_in):
    mine, theirs = signed_in("editor"), signed_in("admin")
    created = _api(theirs, "POST", "/api/jobs", DAG)
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
    saved = _api(theirs, "POST", f"/api/jobs/{job_id}/versions",
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
