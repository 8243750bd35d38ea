"""The editor while a job is being built: edges of an unfinished graph are accepted and the graph
says what is still missing, a refusal does not move the canvas, a refused save's message does
not outlive the document it was about, an empty job is not valid, each operator's input columns
show as soon as its input is sound, unsaved work is not left without a question, and an
incomplete expression is called incomplete."""

from __future__ import annotations

import json

import pytest

from tests.browser.test_editor_canvas import _drag_edge, _edges, _imported

pytestmark = pytest.mark.browser

OUT_OF_ORDER = {
    "name": "built-out-of-order", "key_groups": 16,
    "operators": [
        {"id": "events", "type": "source.generator",
         "params": {"rows_per_second": 100, "keys": 50}},
        {"id": "counts", "type": "window_aggregate",
         "params": {"key": ["campaign_id"], "time": "event_time", "window": "10 seconds",
                    "watermark": "5 seconds", "aggregates": {"views": "count(*)"}}},
        {"id": "out", "type": "sink.memory", "params": {}},
    ],
    "edges": [],
}


def _validity(page) -> str:
    return page.inner_text("#validity")


def _checked(page) -> None:
    page.wait_for_function("!['checking…', ''].includes("
                           "document.querySelector('#validity').textContent)")


def test_a_chain_built_out_of_order_connects_and_a_refusal_keeps_the_canvas_still(
        signed_in, tmp_path):
    page = signed_in("editor")
    page.goto("/jobs/new/")
    _imported(page, tmp_path, OUT_OF_ORDER)
    _checked(page)

    # counts does not reach the sink yet: the edge is accepted all the same, and the graph
    # says what is missing on the operators.
    _drag_edge(page, "events", "counts")
    page.wait_for_function("[...document.querySelectorAll('#editor-graph path.edge')]"
                           ".some((p) => p.dataset.edge === 'events->counts')")
    _checked(page)
    assert page.is_hidden("#edge-message"), page.inner_text("#edge-message")
    assert "reaches no sink" in page.inner_text('[data-operator="counts"] .node-problem') or \
        "reach no sink" in page.inner_text('[data-operator="counts"] .node-problem')
    _drag_edge(page, "counts", "out")
    page.wait_for_function("document.querySelector('#validity').textContent === 'valid'")
    assert sorted(_edges(page)) == ["counts->out", "events->counts"]

    # A refused edge is said over the canvas, which stays where it was.
    before = page.locator("#editor-graph").bounding_box()
    _drag_edge(page, "counts", "events")
    page.wait_for_selector("#edge-message:not([hidden])")
    assert "rejected" in page.inner_text("#edge-message")
    assert page.locator("#editor-graph").bounding_box() == before


def test_a_refused_save_s_message_does_not_outlive_its_document(signed_in, tmp_path):
    page = signed_in("editor", expected_errors=("status of 400",))
    page.goto("/jobs/new/")
    document = dict(OUT_OF_ORDER, name="refused-save",
                    edges=[{"from": "events", "to": "counts"}, {"from": "counts", "to": "out"}])
    _imported(page, tmp_path, document)
    page.wait_for_function("document.querySelector('#validity').textContent === 'valid'")

    # The page's check answers "valid" for a moment, as a slow check would; the server's
    # save is what refuses the document.
    page.route("**/api/validate", lambda route: route.fulfill(
        status=200, content_type="application/json",
        body=json.dumps({"valid": True, "problems": [], "columns": {}})))
    page.click('[data-operator="counts"] .op-select')
    page.fill("#param-counts-window", "")
    page.wait_for_function("document.querySelector('#validity').textContent === 'valid'")
    page.click("#save")
    page.wait_for_function(
        "document.querySelector('#save-status').textContent.startsWith('Not saved')")
    page.unroute("**/api/validate")

    # More edits: the badge counts the document's problems; the refusal is not left to say
    # something else.
    page.click('[data-operator="events"] .op-select')
    page.fill("#param-events-rows_per_second", "")
    page.wait_for_function("/problem/.test(document.querySelector('#validity').textContent)")
    badge = _validity(page)
    status = page.inner_text("#save-status")
    assert "problem" not in status or badge in status, (badge, status)
    assert page.locator("#problems li").count() == int(badge.split()[0])


def test_an_empty_job_is_not_valid(signed_in):
    page = signed_in("editor")
    page.goto("/jobs/new/")
    assert "valid" not in page.get_attribute("#validity", "class").split()
    assert "the job has no operators" in page.inner_text("#problems")
    assert page.is_disabled("#save")

    # One operator added and deleted again: the server's answer says the same.
    page.click('.palette-item[data-type="source.generator"]')
    _checked(page)
    page.click('[data-operator="generator"] .delete')
    page.wait_for_function("document.querySelector('#problems').textContent"
                           ".includes('the job has no operators')")
    assert "valid" not in page.get_attribute("#validity", "class").split()


def test_input_columns_show_once_the_input_is_sound_and_unsaved_work_asks(signed_in, tmp_path):
    page = signed_in("editor")
    page.goto("/jobs/new/")
    document = {
        "name": "columns-early", "key_groups": 16,
        "operators": [
            {"id": "events", "type": "source.generator", "params": {"rows_per_second": 10}},
            {"id": "big", "type": "filter", "params": {"condition": "amount / 0 > 1 AND"}},
        ],
        "edges": [{"from": "events", "to": "big"}],
    }
    _imported(page, tmp_path, document)
    _checked(page)
    # The graph has no sink yet, and still big's input is known.
    page.click('[data-operator="big"] .op-select')
    page.wait_for_selector("#inspector .hint:has-text('Input columns:')")
    assert "amount" in page.inner_text("#inspector")
    # The dangling AND is named for what it is.
    problems = page.inner_text("#problems")
    assert "incomplete" in problems and "nothing follows 'AND'" in problems, problems
    assert "AS is not allowed" not in problems and "map's key" not in problems

    # Leaving with the imported work unsaved asks first.
    with page.expect_event("dialog") as asked:
        page.close(run_before_unload=True)
    assert asked.value.type == "beforeunload"
    asked.value.accept()
