"""History as a person reads it: a change's summary cannot be misread (instances down by one,
not "+1"), durations read as on every other page, each kind offered matches entries, the time
filters say their time zone, and a rebalance names the key groups it moved."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import history_entry, reconfigure
from tests.browser.test_reconfiguration_pages import _applied

pytestmark = pytest.mark.browser

# A cell of the before/after figures: a rate, a duration as the charts and tiles write it,
# or nothing (yet).
FIGURE = re.compile(r"^(—|measuring…|[\d.]+[kM]?/s|\d+ ms|\d+\.\d s)$")


def test_history_reads_unambiguously(fed_run_opened):
    page, run_id, job_id = fed_run_opened("history-reads", 30)
    reconfigure(page, run_id, kind="rebalance", operator="counts",
                reason="the low groups are hot")
    _applied(page, "rebalance")
    reconfigure(page, run_id, kind="rescale", operator="counts", parallelism=1,
                reason="one is enough")
    _applied(page, "rescale")

    page.goto(f"/history/?job={job_id}")
    scaled = history_entry(page, "reconfiguration.rescale")
    summary = scaled.locator("summary").inner_text()
    assert "instances of counts: 2 -> 1 (-1)" in summary, summary
    assert not re.search(r"\(\+\d+\)", summary), summary
    scaled.locator("summary").click()
    cells = scaled.locator(".figures td").all_inner_texts()
    assert cells and all(FIGURE.match(c.strip()) for c in cells), cells

    moved = history_entry(page, "reconfiguration.rebalance")
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
