"""History as a person reads it: a change's summary cannot be misread (instances down by one,
not "+1"), durations read as on every other page, each kind offered matches entries, the time
filters say their time zone, and a rebalance names the key groups it moved."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import api, run_page_open
from tests.browser.test_reconfiguration_pages import _applied

pytestmark = pytest.mark.browser

# A cell of the before/after figures: a rate, a duration as the charts and tiles write it,
# or nothing (yet).
FIGURE = re.compile(r"^(—|measuring…|[\d.]+[kM]?/s|\d+ ms|\d+\.\d s)$")


def test_history_reads_unambiguously(fed_run, signed_in):
    run_id, job_id = fed_run("history-reads", 30)
    page = signed_in("operator")
    run_page_open(page, run_id)
    rebalance = api(page, "POST", f"/api/runs/{run_id}/reconfigurations",
                    {"kind": "rebalance", "operator": "counts", "reason": "the low groups are hot"})
    assert rebalance["status"] == 202, rebalance
    _applied(page, "rebalance")
    rescale = api(page, "POST", f"/api/runs/{run_id}/reconfigurations",
                  {"kind": "rescale", "operator": "counts", "parallelism": 1,
                   "reason": "one is enough"})
    assert rescale["status"] == 202, rescale
    _applied(page, "rescale")

    page.goto(f"/history/?job={job_id}")
    rows = page.locator("#history-rows tr[data-action]")
    scaled = rows.filter(has=page.locator("code:text-is('reconfiguration.rescale')"))
    summary = scaled.locator("summary").inner_text()
    assert "instances of counts: 2 -> 1 (-1)" in summary, summary
    assert not re.search(r"\(\+\d+\)", summary), summary
    scaled.locator("summary").click()
    cells = scaled.locator(".figures td").all_inner_texts()
    assert cells and all(FIGURE.match(c.strip()) for c in cells), cells

    moved = rows.filter(has=page.locator("code:text-is('reconfiguration.rebalance')"))
    moved.locator("summary").click()
    detail = moved.locator(".changes").inner_text()
    assert re.search(r"key groups of counts change instance: \d+(-\d+)? \d->\d", detail), detail

    for label in ("Since", "Until"):
        assert f"{label} (UTC)" in page.inner_text("#history-filters")

    # Every kind offered finds entries; "applied" finds the changes that were applied.
    page.select_option("select[name=action]", "reconfiguration.applied")
    page.wait_for_function("""() => {
      const found = [...document.querySelectorAll('#history-rows td .status')];
      return found.length > 0 && found.every((s) => s.textContent === 'applied');
    }""")
    outcomes = page.locator("#history-rows td .status").all_inner_texts()
    assert outcomes and set(outcomes) == {"applied"}, outcomes
