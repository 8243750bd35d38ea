"""The run page's panels for new operator params, a rebalance and a move to a newer version,
driven as a person would against a fake run whose feeder acknowledges commands as a driver
does: the verdict before Apply, the server's words when it refuses, the change recorded and
applied, and nothing of it for a viewer."""

from __future__ import annotations

import copy

import pytest

from engine.mapping import weighted_assignment
from engine.runtime.operators.changes import logic_change_refused
from tests.browser.conftest import api, htmx_settled, run_page_open, screenshot
from tests.browser.fake_run import TEN_OPERATORS, key_group_weights

pytestmark = pytest.mark.browser

COUNTS = next(op for op in TEN_OPERATORS["operators"] if op["id"] == "counts")["params"]


def _applied(page, kind: str) -> None:
    """Until the run's list of changes shows one of `kind` applied (the feeder acks it)."""
    page.wait_for_selector(
        f'#reconfigurations li[data-status="applied"] .kind:text-is("{kind}")', timeout=20_000)


def _wait_epoch(page, at_least: int) -> None:
    page.wait_for_function(
        f"Number(document.querySelector('#kpi-epoch').textContent) >= {at_least}",
        timeout=30_000)


def test_new_params_show_the_state_safety_verdict_before_apply(fed_run, signed_in):
    run_id, _ = fed_run("logic-page", 10)
    viewer = signed_in("viewer")
    run_page_open(viewer, run_id)
    assert viewer.locator("#logic-change, #rebalance, #version-move, #logic-form").count() == 0

    page = signed_in("operator")
    run_page_open(page, run_id)
    page.select_option("#logic-operator", "counts")
    page.wait_for_selector("#logic-param-window")
    assert page.input_value("#logic-param-window") == "10 seconds"
    assert page.input_value("#logic-param-watermark") == "5 seconds"
    assert page.input_value("#logic-param-aggregates") == "views: count(*)"
    assert "now 5 seconds" in page.inner_text("#logic-param-watermark-hint")
    assert page.is_disabled("#logic-apply")  # nothing changed yet

    page.fill("#logic-param-window", "30 seconds")
    verdict = page.wait_for_selector("#logic-verdict [data-verdict=refused]").inner_text()
    reason = logic_change_refused("window_aggregate", "counts", COUNTS,
                                  dict(COUNTS, window="30 seconds"))
    assert verdict == f"Refused: Operator counts: refused while it runs: {reason}"
    assert page.is_disabled("#logic-apply")

    page.fill("#logic-param-window", "10 seconds")
    page.fill("#logic-param-watermark", "20 seconds")
    page.wait_for_selector("#logic-verdict [data-verdict=safe]")
    assert "State-safe" in page.inner_text("#logic-verdict")
    assert page.is_enabled("#logic-apply")
    page.fill("#logic-reason", "events arrive up to 20 s late")
    page.click("#logic-apply")
    page.wait_for_selector("#logic-outcome [data-reconfiguration-requested]")
    assert page.is_disabled("#logic-apply")
    _applied(page, "logic")
    screenshot(page, "run-logic-change")
    # Applied: the panel shows the operator's params as they now are, ready for another.
    page.wait_for_function("document.querySelector('#logic-param-watermark-hint')"
                           ".textContent.includes('now 20 seconds')", timeout=20_000)
    assert page.input_value("#logic-param-watermark") == "20 seconds"
    assert page.locator("#logic-outcome [data-reconfiguration-requested]").count() == 0
    assert page.is_disabled("#logic-apply")  # nothing changed yet

    # The run ends: its panels go without a reload.
    assert api(page, "POST", f"/api/runs/{run_id}/stop", {"reason": "done"})["status"] == 202
    page.wait_for_selector("#logic-change", state="hidden")
    assert not page.is_visible("#rebalance")
    page.goto("/history/")
    assert "events arrive up to 20 s late" in page.inner_text("#history-rows")


def test_a_rebalance_shows_the_skew_and_moves_key_groups(fed_run, signed_in):
    run_id, _ = fed_run("rebalance-page", 0)
    page = signed_in("operator")
    run_page_open(page, run_id)
    _wait_epoch(page, 3)  # epochs with rows per instance
    page.reload()
    panel = page.locator("#rebalance")
    now = [int(t.split()[0]) for t in panel.locator("[data-f=now]").all_inner_texts()]
    after = [int(t) for t in panel.locator("[data-f=after]").all_inner_texts()]
    assert now == [32, 32]
    # The lower key groups are hotter: instance 0 is estimated to give some of them away.
    assert sum(after) == 64 and after[0] < 32
    assert float(page.inner_text("[data-testid=rebalance-skew]").rstrip("×")) > 1.0
    assert "would change owner" in page.inner_text("[data-testid=rebalance-note]")

    # A keyed operator with one instance: nothing to rebalance, and the page says why.
    page.select_option("#rebalance-operator", "uniq")
    page.wait_for_selector("#rebalance [data-refused]")
    assert "'uniq' runs one instance" in page.inner_text("#rebalance [data-refused]")
    assert page.is_disabled("#rebalance-apply")

    htmx_settled(page)
    page.select_option("#rebalance-operator", "counts")
    page.wait_for_selector("#rebalance-reason")
    page.click("#rebalance-apply")  # no reason yet: the form asks for one
    assert page.evaluate("document.querySelector('#rebalance-reason').validity.valueMissing")
    page.fill("#rebalance-reason", "instance 0 has most of the rows")
    page.click("#rebalance-apply")
    page.wait_for_selector("#rebalance-outcome [data-reconfiguration-requested]")
    _applied(page, "rebalance")
    screenshot(page, "run-rebalance")
    installed = weighted_assignment(key_group_weights(64), 2).owners
    moved = [installed.count(0), installed.count(1)]
    assert moved != [32, 32]
    # Applied: the panel shows the key groups each instance owns now.
    page.wait_for_function(
        "[...document.querySelectorAll('#rebalance [data-f=now]')].map(e => e.textContent)"
        f".join(',') === '{moved[0]},{moved[1]}'", timeout=20_000)
    assert page.is_enabled("#rebalance-apply")

    page.goto(f"/runs/{run_id}/operators/counts/instances/")
    owned = [int(t) for t in page.locator("[data-testid=instances] .kg-count").all_inner_texts()]
    assert owned == moved


def _version(page, job_id: int, base: int, change) -> int:
    document = copy.deepcopy(TEN_OPERATORS)
    document["name"] = "move-page"
    change(document)
    answer = api(page, "POST", f"/api/jobs/{job_id}/versions",
                 {"dag": document, "base_version": base})
    assert answer["status"] == 201, answer
    return answer["body"]["version"]


def _ops(document) -> dict:
    return {op["id"]: op for op in document["operators"]}


def test_a_run_moves_to_the_newer_version_of_its_job(fed_run, signed_in):
    run_id, job_id = fed_run("move-page", 5)
    page = signed_in("operator")
    run_page_open(page, run_id)
    assert page.locator("#version-move").count() == 0  # no newer version yet

    def bots_out(document):
        _ops(document)["clean"]["params"]["condition"] = "campaign_id IS NOT NULL AND user_id > 0"
        _ops(document)["counts"]["parallelism"] = 3

    assert _version(page, job_id, 1, bots_out) == 2
    run_page_open(page, run_id)
    panel = page.inner_text("#version-move")
    assert "v2 of move-page is newer than v1, which this run started from" in panel
    changed = page.locator("[data-testid=move-changes] li").evaluate_all(
        "items => items.map(i => i.dataset.operators)")
    assert "clean" in changed and "counts" in changed
    assert "2 → 3" in page.inner_text("[data-testid=move-instances]")
    page.fill("#move-reason", "v2 leaves out anonymous users")
    page.click("#move-apply")
    page.wait_for_selector("#move-outcome [data-reconfiguration-requested]")
    _applied(page, "rollback to v2")
    screenshot(page, "run-version-move")

    run_page_open(page, run_id)
    assert page.inner_text("[data-testid=plan-version]") == "plan of v2"
    assert "This run has the plan of v2" in page.inner_text("[data-testid=move-done]")
    assert page.inner_text('[data-operator="counts"] [data-f="instances"]') == "3"

    # A version with another operator cannot replace the plan of a running run.
    def alerts_twice(document):
        document["operators"].append({"id": "loud", "type": "filter",
                                      "params": {"condition": "views > 1000"}})
        document["edges"] = [e for e in document["edges"] if e["to"] != "alerts"]
        document["edges"] += [{"from": "hot", "to": "loud"}, {"from": "loud", "to": "alerts"}]

    assert _version(page, job_id, 2, alerts_twice) == 3
    run_page_open(page, run_id)
    refusal = page.inner_text("#version-move [data-refused]")
    assert refusal == ("Not possible while it runs: The target plan has other operators or "
                       "edges: start a new run of that version instead")
    assert "operator loud added" in page.inner_text("[data-testid=move-changes]")
    assert page.is_disabled("#move-apply")
    assert page.locator("#move-reason").count() == 0
