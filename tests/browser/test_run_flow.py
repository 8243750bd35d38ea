"""The run page's graph as the live view: each edge shows the rows per second it carries and
each operator its back-pressure level, both redrawn with each epoch pushed over the websocket;
the figures say when a backlog will be gone at the current rates."""

from __future__ import annotations

import pytest

from tests.browser.conftest import run_page_open, screenshot
from tests.browser.published import chain_epoch as _epoch
from tests.browser.published import chain_run as _run
from tests.browser.published import publish as _publish

pytestmark = pytest.mark.browser

def _edge_rates(page) -> dict[str, str]:
    return dict(page.locator("#run-graph text.edge-rate").evaluate_all(
        "els => els.map((el) => [el.dataset.edge, el.textContent])"))


def _levels(page) -> dict[str, str]:
    return dict(page.locator("#run-graph .node").evaluate_all(
        "els => els.map((el) => [el.dataset.operator, el.querySelector('.bp-badge').textContent])"))


def _node_out(page, operator: str) -> str:
    return page.locator(f"#run-graph .node[data-operator={operator}] [data-f=out]").inner_text()


def test_edges_carry_their_rates_and_operators_their_back_pressure(stack, signed_in):
    run_id = _run(stack, "flow-rates")
    page = signed_in("viewer")
    run_page_open(page, run_id)
    assert set(_edge_rates(page).values()) == {"—"}  # nothing measured yet

    _publish(stack, run_id, _epoch(1, out={"src": 1000, "keep": 600, "counts": 20},
                                   busy={"src": 50, "keep": 300, "counts": 900, "out": 5}))
    page.wait_for_function("document.querySelector('#kpi-epoch').textContent === '1'")
    assert _edge_rates(page) == {"src->keep": "1000/s", "keep->counts": "600/s",
                                 "counts->out": "20.0/s"}
    assert _levels(page) == {"src": "OK", "keep": "LOW", "counts": "HIGH", "out": "OK"}
    title = page.locator(".node[data-operator=counts] .bp-badge").get_attribute("title")
    assert "busy 90 % of the last epoch" in title

    # The next epoch redraws both: rates over the epochs the figures are over (as each node's
    # out/s), levels from the newest epoch.
    _publish(stack, run_id, _epoch(2, out={"src": 3000, "keep": 1800, "counts": 60},
                                   busy={"src": 600, "keep": 80, "counts": 400, "out": 5}))
    page.wait_for_function("document.querySelector('#kpi-epoch').textContent === '2'")
    rates = _edge_rates(page)
    assert rates == {"src->keep": "2000/s", "keep->counts": "1200/s", "counts->out": "40.0/s"}
    for edge, shown in rates.items():
        assert shown == _node_out(page, edge.split("->")[0]) + "/s"
    assert _levels(page) == {"src": "HIGH", "keep": "OK", "counts": "LOW", "out": "OK"}
    page.locator(".graph-card").scroll_into_view_if_needed()
    screenshot(page, "graph-edge-rates", full_page=False)


def test_a_backlog_shows_when_it_will_be_gone(stack, signed_in):
    run_id = _run(stack, "flow-backlog")
    page = signed_in("viewer")
    run_page_open(page, run_id)
    caught = page.locator("#kpi-catch-up")
    steady = {"src": 3000, "keep": 1800, "counts": 60}
    busy = {"src": 50, "keep": 300, "counts": 900, "out": 5}

    _publish(stack, run_id, _epoch(1, out=steady, busy=busy, backlog=60000, growth=-1000),
             _epoch(2, out=steady, busy=busy, backlog=58000, growth=-1000))
    page.wait_for_function("document.querySelector('#kpi-epoch').textContent === '2'")
    assert caught.get_attribute("data-state") == "catching-up"
    assert caught.inner_text().splitlines()[0] == "in 58 s"
    assert caught.locator(".trend").inner_text().endswith("UTC")
    assert "drain at 1000 rows/s" in caught.get_attribute("title")

    # A backlog that grows over the epochs shown never catches up at these rates.
    _publish(stack, run_id, _epoch(3, out=steady, busy=busy, backlog=62000, growth=4000))
    page.wait_for_function("document.querySelector('#kpi-epoch').textContent === '3'")
    assert caught.get_attribute("data-state") == "falling-behind"
    assert caught.inner_text() == "not at these rates"
    assert "grows by 667 rows/s" in caught.get_attribute("title")

    _publish(stack, run_id, _epoch(4, out=steady, busy=busy, backlog=0, growth=-1000))
    page.wait_for_function("document.querySelector('#kpi-epoch').textContent === '4'")
    assert (caught.get_attribute("data-state"), caught.inner_text()) == ("caught-up", "caught up")
