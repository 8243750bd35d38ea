"""Selecting an operator in the run page's graph opens its own figures over time: rows in and
out, each instance's busy share, and for a keyed operator its watermark lag and state bytes;
its instances are listed, and the open charts take each new epoch."""

from __future__ import annotations

import pytest

from tests.browser.conftest import run_page_open, screenshot
from tests.browser.published import chain_epoch, chain_run, publish

pytestmark = pytest.mark.browser

OUT = {"src": 3000, "keep": 1800, "counts": 60}


def _epoch(epoch: int, counts_busy: list[float]) -> dict:
    keyed = {"counts": {"watermark_delay_ms": 4000.0 + 100 * epoch,
                        "watermark_lag_ms": 900.0, "watermark_ms": 1.7e12,
                        "state_bytes_read": 20000 * epoch, "state_bytes_written": 8000}}
    return chain_epoch(epoch, out=OUT, busy={"src": 50, "keep": 120, "counts": counts_busy,
                                             "out": 5}, keyed=keyed)


def _points(page, chart: str) -> str:
    return page.locator(f"#{chart}").get_attribute("data-points")


def test_an_operator_s_figures_and_instances_open_from_the_graph(stack, signed_in):
    run_id = chain_run(stack, "drill-chain")
    publish(stack, run_id, *[_epoch(e, [900, 300]) for e in (1, 2, 3)])
    page = signed_in("viewer")
    run_page_open(page, run_id)
    drill = page.locator("#operator-drill")
    assert drill.is_hidden()

    page.locator(".node[data-operator=counts] .op-id").click()
    page.wait_for_function(
        "document.querySelector('#drill-busy')?.dataset.points === '3'")
    assert drill.get_attribute("data-operator") == "counts"
    assert page.locator("#drill-title").inner_text() == "Operator counts window_aggregate"
    instances = page.locator(".drill-instances tbody tr").evaluate_all(
        "rows => rows.map((r) => [...r.cells].map((c) => c.textContent))")
    assert instances == [["#0", "90 %", "90 %"], ["#1", "30 %", "30 %"]]
    # One line per instance in the busy chart, one per figure in the others.
    legend = page.locator("#drill-busy .u-series th").all_inner_texts()
    assert [t.strip() for t in legend[1:]] == ["#0", "#1"]
    for chart in ("drill-rows", "drill-watermark", "drill-state"):
        assert page.locator(f"#{chart}").is_visible()
        assert _points(page, chart) == "3"
    assert "3 epochs (1–3)" in page.locator("[data-drill=note]").inner_text()
    assert page.get_by_text("Not recorded per operator").is_visible()
    screenshot(page.locator("#operator-drill"), "operator-drill")

    # The next epoch reaches the open charts, with a third instance drawn from then on.
    publish(stack, run_id, _epoch(4, [500, 400, 100]))
    page.wait_for_function(
        "document.querySelectorAll('.drill-instances tbody tr').length === 3")
    assert _points(page, "drill-rows") == "4"
    last = page.locator(".drill-instances tbody tr").evaluate_all(
        "rows => rows.map((r) => r.cells[1].textContent)")
    assert last == ["50 %", "40 %", "10 %"]

    # From the keyboard, a stateless operator: no keyed charts, no key-group link.
    page.locator(".node[data-operator=keep] .op-id").focus()
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelector('#operator-drill').dataset.loaded === 'keep'")
    assert _points(page, "drill-rows") == "4"
    assert page.locator("#drill-watermark").is_hidden()
    assert page.locator("[data-drill=instances-link]").is_hidden()
    page.get_by_role("button", name="Close").click()
    assert drill.is_hidden()
