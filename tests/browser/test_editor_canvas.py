"""The editor's canvas: an edge drawn by dragging from an operator's port (validated, undone
and saved like every other edit; refused with the reason), panning and zooming with the mouse,
the buttons and the keys, the shortcuts' help, and a first view whose text stays readable and
shows the whole graph, down to its sinks, at 1280 and 1024 pixels."""

from __future__ import annotations

import copy
import json

import pytest

from tests.browser.conftest import api, screenshot
from tests.browser.fake_run import TEN_OPERATORS

pytestmark = pytest.mark.browser

CHAIN = {
    "name": "drag-chain", "key_groups": 16,
    "operators": [
        {"id": "events", "type": "source.generator", "params": {"rows_per_second": 100}},
        {"id": "clean", "type": "filter", "params": {"condition": "user_id IS NOT NULL"}},
        {"id": "views", "type": "filter", "params": {"condition": "event_type = 'view'"}},
        {"id": "out", "type": "sink.memory", "params": {}},
    ],
    "edges": [{"from": "events", "to": "clean"}, {"from": "clean", "to": "views"},
              {"from": "views", "to": "out"}],
}


def _imported(page, tmp_path, document: dict) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(document))
    page.set_input_files("#import-file", str(path))
    page.wait_for_selector(".editor-node")


def _centre(page, selector: str) -> tuple[float, float]:
    box = page.locator(selector).bounding_box()
    assert box is not None, selector
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def _drag_edge(page, start: str, end: str, *, release: bool = True) -> None:
    """From an operator's port to the middle of another operator, as a person drags."""
    page.mouse.move(*_centre(page, f'[data-operator="{start}"] .port'))
    page.mouse.down()
    page.mouse.move(*_centre(page, f'[data-operator="{end}"] .node-problem'), steps=8)
    if release:
        page.mouse.up()


def _edges(page) -> list[str]:
    return page.locator("#editor-graph path.edge:not(.drafting)").evaluate_all(
        "paths => paths.map((p) => p.dataset.edge)")


def _box(page, operator: str) -> dict:
    box = page.locator(f'[data-operator="{operator}"]').bounding_box()
    assert box is not None
    return box


def _inside(box: dict, canvas: dict) -> bool:
    return (canvas["x"] <= box["x"] and box["x"] + box["width"] <= canvas["x"] + canvas["width"]
            and canvas["y"] <= box["y"]
            and box["y"] + box["height"] <= canvas["y"] + canvas["height"])


def test_a_dragged_edge_is_validated_undone_and_saved(signed_in, tmp_path):
    page = signed_in("editor")
    page.goto("/jobs/new/")
    unconnected = copy.deepcopy(CHAIN)
    unconnected["edges"] = unconnected["edges"][:2]  # views feeds nothing: the sink is alone
    _imported(page, tmp_path, unconnected)
    page.wait_for_function("document.querySelector('#validity').textContent.includes('problem')")
    assert page.is_disabled("#save")

    _drag_edge(page, "views", "out", release=False)
    assert "Release to connect views → out" in page.inner_text("#connect-hint")
    assert "drop-ok" in page.get_attribute('[data-operator="out"]', "class")
    page.mouse.up()
    page.wait_for_function("document.querySelector('#validity').textContent === 'valid'")
    assert "views->out" in _edges(page)
    assert page.locator("#editor-graph path.drafting").count() == 0

    # The drag is an edit like the others: undone and redone with the keys.
    page.keyboard.press("Control+z")
    assert "views->out" not in _edges(page)
    page.keyboard.press("Control+y")
    assert "views->out" in _edges(page)

    page.fill("#save-comment", "connected by dragging")
    page.click("#save")
    page.wait_for_url("**/jobs/*/?version=1")
    job_id = page.url.split("/jobs/")[1].split("/")[0]
    job = page.evaluate(f"fetch('/api/jobs/{job_id}').then((r) => r.json())")
    assert {"from": "views", "to": "out"} in job["versions"][0]["dag"]["edges"]


def test_a_refused_drag_says_why_and_esc_cancels_a_drag(signed_in, tmp_path):
    page = signed_in("editor")
    page.goto("/jobs/new/")
    _imported(page, tmp_path, CHAIN)
    page.wait_for_function("document.querySelector('#validity').textContent === 'valid'")
    before = _edges(page)

    # Into a source: shown as refused while hovering, and rejected with the server's message
    # on release.
    _drag_edge(page, "views", "events", release=False)
    assert "drop-refused" in page.get_attribute('[data-operator="events"]', "class")
    assert "events is a source" in page.inner_text("#connect-hint")
    page.mouse.up()
    message = page.wait_for_selector("#edge-message:not([hidden])").inner_text()
    assert message.startswith("Edge views → events rejected: operator 'events': "), message
    assert "cannot have inputs" in message, message
    assert _edges(page) == before

    # Back up the chain: a cycle, named by the server. The refusal above named a cycle too
    # (views -> events closes one), so wait for this edge's own message.
    _drag_edge(page, "views", "clean")
    page.wait_for_function(
        "document.querySelector('#edge-message').textContent.startsWith('Edge views → clean')")
    assert "is on a cycle" in page.inner_text("#edge-message")
    assert _edges(page) == before

    # Esc while dragging: the drop then adds nothing.
    _drag_edge(page, "clean", "out", release=False)
    assert page.locator("#editor-graph path.drafting").count() == 1
    page.keyboard.press("Escape")
    assert page.locator("#editor-graph path.drafting").count() == 0
    page.mouse.up()
    assert _edges(page) == before
    assert page.inner_text("#connect-hint") == ""


def test_the_canvas_pans_zooms_fits_and_lists_its_keys(signed_in, tmp_path):
    page = signed_in("editor")
    page.goto("/jobs/new/")
    _imported(page, tmp_path, TEN_OPERATORS)
    canvas = page.locator("#editor-graph").bounding_box()
    assert canvas is not None

    # Drag on the background: the graph follows the mouse.
    start = _box(page, "events")
    empty = page.evaluate("""() => {
      const box = document.querySelector('#editor-graph').getBoundingClientRect();
      for (let y = box.top + 4; y < box.bottom; y += 8) {
        for (let x = box.left + 4; x < box.right; x += 8) {
          if (!document.elementFromPoint(x, y).closest('.node, .edge-hit')) return [x, y];
        }
      }
    }""")
    page.mouse.move(*empty)
    page.mouse.down()
    page.mouse.move(empty[0] + 60, empty[1] + 40, steps=5)
    page.mouse.up()
    moved = _box(page, "events")
    assert (round(moved["x"] - start["x"]), round(moved["y"] - start["y"])) == (60, 40)

    # The buttons and the keys zoom; the wheel zooms where the mouse is.
    width = _box(page, "events")["width"]
    page.click("#zoom-in")
    assert _box(page, "events")["width"] == pytest.approx(width * 1.25, rel=0.02)
    page.keyboard.press("-")
    assert _box(page, "events")["width"] == pytest.approx(width, rel=0.02)
    page.mouse.move(canvas["x"] + canvas["width"] / 2, canvas["y"] + canvas["height"] / 2)
    page.mouse.wheel(0, 400)
    assert _box(page, "events")["width"] < width * 0.8

    # Fit: every operator within the canvas again, after the pan and zooms.
    page.click("#zoom-fit")
    outside = [op["id"] for op in TEN_OPERATORS["operators"]
               if not _inside(_box(page, op["id"]), canvas)]
    assert outside == []

    # A selected edge goes with Delete, and comes back with Undo.
    page.locator('#editor-graph path.edge-hit').first.dispatch_event("click")
    selected = page.locator("#editor-graph path.edge.selected").get_attribute("data-edge")
    page.keyboard.press("Delete")
    assert selected not in _edges(page) and len(_edges(page)) == 8
    page.keyboard.press("Control+z")
    assert selected in _edges(page)

    # The shortcuts are listed in a dialog that ? opens and Esc closes.
    page.keyboard.press("?")
    dialog = page.locator("dialog#shortcuts")
    assert dialog.is_visible()
    keys = dialog.inner_text()
    for shortcut in ("Undo", "Redo", "Delete", "Esc", "Zoom in", "Fit the whole graph"):
        assert shortcut in keys
    screenshot(page, "editor-shortcuts", full_page=False)
    page.keyboard.press("Escape")
    assert not dialog.is_visible()


@pytest.mark.parametrize("width", [1280, 1024])
def test_the_first_view_shows_every_operator_readably(signed_in, width):
    page = signed_in("editor", width=width)
    created = api(page, "POST", "/api/jobs", dict(copy.deepcopy(TEN_OPERATORS),
                                                  name=f"ten-in-view-{width}"))
    assert created["status"] == 201, created
    page.goto(f"/jobs/{created['body']['id']}/edit/")
    page.wait_for_function("document.querySelector('#validity').textContent === 'valid'")
    canvas = page.locator("#editor-graph").bounding_box()
    assert canvas is not None
    outside = [op["id"] for op in TEN_OPERATORS["operators"]
               if not _inside(_box(page, op["id"]), canvas)]
    assert outside == []  # the sinks included
    # The text as drawn: its font size times the scale the canvas shows it at.
    sizes = page.locator(".editor-node .op-select, .editor-node .op-type").evaluate_all("""els =>
      els.map((el) => parseFloat(getComputedStyle(el).fontSize)
        * el.getBoundingClientRect().width / el.offsetWidth)""")
    assert min(sizes) >= 10.5, sizes
    screenshot(page, f"editor-{width}", full_page=False)
