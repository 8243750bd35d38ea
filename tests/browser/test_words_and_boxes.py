"""Words and boxes: figures are explained where they are shown (ETP as a share from 0 to 1, the
true rate), text stays inside its box (palette entries, graph notes), names read as written,
a checkbox sits by its words, and the user form's refusal is said by the form, keeping what
was typed."""

from __future__ import annotations

import pytest

from tests.browser.conftest import PASSWORD, run_page_open

pytestmark = pytest.mark.browser


def test_the_run_graph_explains_its_figures(fed_run, signed_in):
    run_id, _ = fed_run("explained", 30)
    page = signed_in("viewer")
    run_page_open(page, run_id)
    page.wait_for_function("document.querySelector('[data-operator=\"counts\"] [data-f=\"etp\"]')"
                           ".textContent !== '—'")
    counts = page.locator('[data-operator="counts"]')
    etp_title = counts.locator(".etp").get_attribute("title")
    assert "0 to 1" in etp_title and "percentage" not in etp_title, etp_title
    assert 0.0 <= float(counts.locator('[data-f="etp"]').inner_text()) <= 1.0
    true_title = counts.locator(".m", has=page.locator('[data-f="true"]')).get_attribute("title")
    assert "rows per second" in true_title and "busy" in true_title, true_title
    # Every note a node shows is whole in its title when its line cuts it.
    notes = page.locator('#run-graph [data-f="note"]').evaluate_all(
        "els => els.filter((el) => el.scrollWidth > el.clientWidth)"
        ".map((el) => [el.textContent, el.title])")
    assert all(text.replace(" · ", "\n") == title for text, title in notes), notes


def test_palette_entries_stay_in_their_boxes(signed_in):
    page = signed_in("editor", width=1280)
    page.goto("/jobs/new/")
    page.wait_for_selector(".palette-item")
    out = page.locator(".palette-item").evaluate_all(
        "els => els.filter((el) => el.scrollWidth > el.clientWidth"
        " || el.getBoundingClientRect().right > el.closest('.card').getBoundingClientRect().right)"
        ".map((el) => el.dataset.type)")
    assert out == []


def test_users_read_as_written_and_a_refused_user_keeps_the_form(signed_in):
    page = signed_in("admin", expected_errors=("status of 400",))
    page.goto("/users/")
    shown = page.locator("tbody th[scope=row]").first
    assert shown.evaluate("(el) => getComputedStyle(el).textTransform") == "none"

    # The token's checkbox sits right by its words.
    box = page.locator("#add-user input[name=token]").bounding_box()
    words = page.locator("#add-user label:has(input[name=token])").bounding_box()
    assert box["x"] - words["x"] < 8 and box["width"] < 40, (box, words)

    # A name that is taken: the form says so, beside itself, and keeps what was typed.
    page.fill("#add-user input[name=username]", "viewer-b")
    page.fill("#add-user input[name=password]", PASSWORD)
    page.check("#add-user input[name=token]")
    page.click("#add-user button[type=submit]")
    error = page.wait_for_selector(".card #add-user-error")
    assert "viewer-b" in error.inner_text()
    form = page.locator("#add-user").bounding_box()
    said = error.bounding_box()
    assert 0 <= form["y"] - (said["y"] + said["height"]) < 40
    assert page.input_value("#add-user input[name=password]") == PASSWORD
    assert page.is_checked("#add-user input[name=token]")
