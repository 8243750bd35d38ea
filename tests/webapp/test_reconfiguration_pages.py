"""The run page's panels for the reconfigurations the API had without a page: new params for a
running operator (with the state-safety verdict), a rebalance of a keyed operator (its skew
and the key groups each instance would own) and a move to the job's newer version. Each goes
through the API's services, answers with the server's words when refused, is offered only to
operators and admins of a live run, and is audited like any reconfiguration."""

from __future__ import annotations

import copy
import json
import re

import pytest

from engine.runtime.operators.changes import logic_change_refused
from tests.webapp.conftest import KEYED_DAG, epoch_metrics
from webapp.accounts.roles import Role
from webapp.audit.models import AuditEntry
from webapp.jobs.models import Reconfiguration

pytestmark = pytest.mark.django_db

COUNTS = KEYED_DAG["operators"][2]["params"]
PANELS = ('id="logic-form"', 'id="rebalance-form"', 'id="version-move"')


def _page(client, run) -> str:
    return client.get(f"/runs/{run.pk}/").content.decode()


def _section(html: str, marker: str) -> str:
    return html.split(marker, 1)[1].split("</section>", 1)[0]


def _logic_form(counts: dict, **changed) -> dict:
    """The logic form of `counts` as posted, with `changed` params typed over the current."""
    texts = {"key": ", ".join(counts["key"]), "time": counts["time"],
             "window": counts["window"], "slide": "", "watermark": counts["watermark"],
             "aggregates": "\n".join(f"{k}: {v}" for k, v in counts["aggregates"].items())}
    texts.update(changed)
    return {"operator": "counts", **{f"param.{k}": v for k, v in texts.items()}}


def _new_version(run, change) -> int:
    from webapp.jobs.models import Trigger
    from webapp.jobs.services import job_version_create

    document = copy.deepcopy(run.version.dag)
    change(document)
    version = job_version_create(job_id=run.job_id, dag=document, base_version=1, actor=None,
                                 trigger=Trigger.USER, comment="newer")
    return version.number


def _record_rows(run, epochs: int, rows: list[int]) -> None:
    """Epochs in which `counts` had `rows` per instance, as the driver reports them."""
    from webapp.jobs.metrics import run_epoch_record

    for epoch in range(1, epochs + 1):
        metrics = epoch_metrics(epoch, counts_in=sum(rows), counts_capacity=5000.0)
        metrics["interval_ms"] = 1000.0
        metrics["operators"]["counts"].update(rows_in_per_instance=rows, rows_in=sum(rows),
                                              busy_ms=[900.0, 300.0])
        metrics["operators"]["events"]["rows_in"] = None
        assert run_epoch_record(run_id=run.pk, metrics=metrics, sinks=frozenset({"out"}))


# ---- who sees the panels ------------------------------------------------------------------

def test_only_operators_and_admins_of_a_live_run_get_the_panels(session_client, live_run):
    _new_version(live_run, lambda d: d["operators"][1]["params"].update(
        condition="event_type = 'click'"))
    for role in (Role.OPERATOR, Role.ADMIN):
        page = _page(session_client(role), live_run)
        assert all(panel in page for panel in PANELS), role
    for role in (Role.VIEWER, Role.EDITOR):
        page = _page(session_client(role), live_run)
        assert not any(panel in page for panel in PANELS), role
        assert "Operator params" not in page and "Rebalance key groups" not in page


@pytest.mark.parametrize("method,path", [
    ("get", "logic?operator=counts"), ("post", "logic/preview"), ("post", "logic/apply"),
    ("get", "rebalance?operator=counts"), ("get", "version-move"),
])
def test_viewers_and_editors_are_refused_every_panel(session_client, live_run, method, path):
    body = {**_logic_form(COUNTS, watermark="20 seconds"), "reason": "x"}
    for role in (Role.VIEWER, Role.EDITOR):
        client = session_client(role)
        response = getattr(client, method)(f"/runs/{live_run.pk}/{path}",
                                           *([body] if method == "post" else []))
        assert response.status_code == 403, (role, path)
        assert "operator role" in response.content.decode()
    assert live_run.reconfigurations.count() == 0


def test_a_stopped_run_offers_none_and_its_changes_are_refused(session_client, live_run):
    from webapp.jobs.models import RunStatus
    from webapp.runs.services import run_status_set

    _new_version(live_run, lambda d: d["operators"][1]["params"].update(
        condition="event_type = 'click'"))
    run_status_set(run_id=live_run.pk, status=RunStatus.STOPPED)
    client = session_client(Role.OPERATOR)
    page = _page(client, live_run)
    assert not any(panel in page for panel in PANELS)
    panel = client.get(f"/runs/{live_run.pk}/logic?operator=counts").content.decode()
    assert "The run is stopped: its params cannot change." in panel
    assert 'id="logic-form"' not in panel
    refused = client.post(f"/runs/{live_run.pk}/logic/apply", {
        **_logic_form(COUNTS, watermark="20 seconds"), "reason": "later"}).content.decode()
    assert f"Run {live_run.pk} is stopped: only a live run can be reconfigured" in refused
    assert live_run.reconfigurations.count() == 0


# ---- new params for an operator -----------------------------------------------------------

def test_the_params_form_is_built_from_the_catalog_with_the_current_values(
    session_client, live_run
):
    client = session_client(Role.OPERATOR)
    form = _section(_page(client, live_run), 'id="logic-change"')
    options = re.findall(r'<option value="([^"]+)"( disabled)?', form)
    # Sources are not offered; a sink is listed, disabled with the server's reason.
    assert [o[0] for o in options] == ["views", "counts", "out"]
    assert dict(options)["out"] == " disabled"
    assert "out (sink.memory): sources and sinks change only with a restart" in form
    # The first operator whose params may change is open: views, a filter.
    assert 'name="param.condition"' in form and "event_type = &#x27;view&#x27;" in form

    counts = client.get(f"/runs/{live_run.pk}/logic?operator=counts").content.decode()
    names = re.findall(r'name="param\.([a-z_]+)"', counts)
    assert names == ["key", "time", "window", "slide", "watermark", "aggregates"]
    assert 'id="logic-param-window"' in counts and 'value="10 seconds"' in counts
    assert "views: count(*)</textarea>" in counts
    assert re.search(r'id="logic-param-time"[^>]*required', counts)
    assert "interval · now <code>5 seconds</code>" in counts
    assert "slide-hint" in counts and "interval · now left out" in counts
    assert re.search(r'id="logic-apply" disabled', counts)


def test_the_preview_gives_the_engine_s_state_safety_verdict(session_client, live_run):
    client = session_client(Role.OPERATOR)
    url = f"/runs/{live_run.pk}/logic/preview"
    reshaped = dict(COUNTS, window="30 seconds")
    reason = logic_change_refused("window_aggregate", "counts", COUNTS, reshaped)
    assert reason is not None

    refused = client.post(url, _logic_form(COUNTS, window="30 seconds")).content.decode()
    assert 'data-verdict="refused"' in refused
    assert f"Operator counts: refused while it runs: {reason}" in refused.replace("&#x27;", "'")
    assert re.search(r'id="logic-apply" disabled title="The server refuses', refused)

    safe = client.post(url, _logic_form(COUNTS, watermark="20 seconds")).content.decode()
    assert logic_change_refused("window_aggregate", "counts", COUNTS,
                                dict(COUNTS, watermark="20 seconds")) is None
    assert 'data-verdict="safe"' in safe and "State-safe" in safe
    assert "params of counts" in safe and 'id="logic-apply">' in safe

    same = client.post(url, _logic_form(COUNTS)).content.decode()
    assert "Params: &#x27;counts&#x27; already has these params" in same
    # Operators the form does not offer are refused in the service's words.
    source = client.post(url, {"operator": "events", "param.rows_per_second": "5"})
    assert source.status_code == 200 and (
        "Operator events: sources and sinks change only with a restart" in source.content.decode())
    unknown = client.post(url, {"operator": "nope"}).content.decode()
    assert "Operator: there is no operator &#x27;nope&#x27; in this job" in unknown
    assert live_run.reconfigurations.count() == 0


def test_a_stateless_operator_s_new_condition_is_checked_by_the_validator(
    session_client, live_run
):
    client = session_client(Role.OPERATOR)
    url = f"/runs/{live_run.pk}/logic/preview"
    bad = client.post(url, {"operator": "views", "param.condition": "no_such_column > 1"})
    assert "unknown column &#x27;no_such_column&#x27;" in bad.content.decode()
    good = client.post(url, {"operator": "views", "param.condition": "event_type = 'click'"})
    assert "keeps no state" in good.content.decode()


def test_applying_new_params_records_delivers_and_audits_a_logic_change(
    session_client, live_run
):
    client = session_client(Role.OPERATOR)
    url = f"/runs/{live_run.pk}/logic/apply"
    refused = client.post(url, {**_logic_form(COUNTS, time=""), "reason": "x"}).content.decode()
    assert "Refused:" in refused and "time" in refused
    assert live_run.reconfigurations.count() == 0

    done = client.post(url, {**_logic_form(COUNTS, watermark="20 seconds"),
                             "reason": "events arrive late", "request_id": "logic-1"})
    assert done["HX-Trigger"] == "reconfigurations-changed"
    assert "data-reconfiguration-requested" in done.content.decode()
    change = Reconfiguration.objects.get(run=live_run)
    assert change.kind == "logic" and change.operators == ["counts"]
    assert change.request["params"] == dict(COUNTS, watermark="20 seconds")
    (command,) = change.commands
    assert command["kind"] == "logic" and json.loads(command["params"])["watermark"] == (
        "20 seconds")
    entry = AuditEntry.objects.get(action="reconfiguration.logic")
    assert entry.reason == "events arrive late" and entry.reconfiguration_id_ref == change.pk
    assert entry.actor_name == "operator-session"
    live_run.refresh_from_db()
    assert live_run.target_dag["operators"][2]["params"]["watermark"] == "20 seconds"


# ---- rebalance ----------------------------------------------------------------------------

def test_the_rebalance_panel_shows_the_skew_and_the_key_groups_after(session_client, live_run):
    _record_rows(live_run, 3, [750, 250])
    page = _page(session_client(Role.OPERATOR), live_run)
    panel = _section(page, 'id="rebalance"')
    assert 'data-testid="rebalance-skew">1.50×' in panel
    rows = re.findall(r'<tr data-instance="(\d)">.*?data-f="now">(\d+).*?data-f="after">(\d+)',
                      panel, re.S)
    # 750 and 250 rows over 8 key groups each: the weighted cut gives instance 0 five of them.
    from engine.mapping import weighted_assignment

    owners = weighted_assignment([750 / 8] * 8 + [250 / 8] * 8, 2).owners
    assert rows == [("0", "8", str(owners.count(0))), ("1", "8", str(owners.count(1)))]
    assert rows == [("0", "8", "5"), ("1", "8", "11")]
    assert "3 key groups would change owner" in panel
    assert not re.search(r'id="rebalance-apply"[^>]*disabled', panel)


def test_without_rows_per_instance_the_panel_says_there_is_no_estimate(session_client, live_run):
    panel = session_client(Role.OPERATOR).get(
        f"/runs/{live_run.pk}/rebalance?operator=counts").content.decode()
    assert "No rows per instance recorded yet, so no estimate" in panel
    assert 'data-f="after">—' in panel


def test_applying_a_rebalance_requests_the_weighted_assignment(session_client, live_run):
    _record_rows(live_run, 2, [750, 250])
    client = session_client(Role.OPERATOR)
    done = client.post(f"/runs/{live_run.pk}/reconfigure", {
        "kind": "rebalance", "operator": "counts", "reason": "instance 0 is hot",
        "request_id": "rebalance-1"})
    assert "data-reconfiguration-requested" in done.content.decode()
    change = Reconfiguration.objects.get(run=live_run)
    assert change.kind == "rebalance" and change.request["assignment"] == "weighted"
    assert change.commands[0]["kind"] == "rebalance"
    assert change.commands[0]["assignment"] == "weighted"
    assert AuditEntry.objects.get(action="reconfiguration.rebalance").reason == (
        "instance 0 is hot")


# ---- a newer version ----------------------------------------------------------------------

def test_no_newer_version_no_move(session_client, live_run):
    page = _page(session_client(Role.OPERATOR), live_run)
    assert 'id="version-move"' not in page


def test_moving_to_a_newer_version_shows_the_changes_then_applies_and_audits(
    session_client, live_run
):
    def change(document):
        document["operators"][1]["params"]["condition"] = "event_type = 'click'"
        document["operators"][2]["parallelism"] = 3

    number = _new_version(live_run, change)
    client = session_client(Role.OPERATOR)
    panel = _section(_page(client, live_run), 'id="version-move"')
    assert "v2 of counts-job is newer than v1, which this run started from" in panel
    changes = re.findall(r'<li data-operators="([^"]*)">', panel)
    assert "views" in changes and "counts" in changes
    assert "instances of counts: 2 -&gt; 3" in panel
    assert "<code>counts</code></td><td>2 → <strong>3</strong>" in panel
    assert 'name="to_version" value="2"' in panel

    done = client.post(f"/runs/{live_run.pk}/reconfigure", {
        "kind": "rollback", "to_version": str(number), "reason": "v2 counts clicks",
        "request_id": "move-1"})
    assert "data-reconfiguration-requested" in done.content.decode()
    move = Reconfiguration.objects.get(run=live_run)
    assert move.kind == "rollback" and move.request["to_version"] == 2
    assert {c["kind"] for c in move.commands} == {"logic", "rescale"}
    assert AuditEntry.objects.get(action="reconfiguration.rollback").reason == "v2 counts clicks"

    after = _page(client, live_run)
    assert 'data-testid="plan-version">plan of v2' in after
    assert "This run has the plan of v2" in _section(after, 'id="version-move"')
    assert 'id="move-form"' not in after
    listing = client.get(f"/runs/{live_run.pk}/reconfigurations").content.decode()
    assert "rollback to v2" in listing


def test_a_newer_version_with_other_operators_is_refused_with_the_server_s_reason(
    session_client, live_run
):
    def change(document):
        document["operators"].insert(3, {"id": "big", "type": "filter",
                                         "params": {"condition": "views > 10"}})
        document["edges"][-1] = {"from": "counts", "to": "big"}
        document["edges"].append({"from": "big", "to": "out"})

    number = _new_version(live_run, change)
    client = session_client(Role.OPERATOR)
    panel = _section(_page(client, live_run), 'id="version-move"')
    assert "operator big added" in panel
    assert ("The target plan has other operators or edges: start a new run of that version "
            "instead") in panel
    assert re.search(r'id="move-apply" disabled title="The server refuses', panel)
    assert 'id="move-form"' not in panel
    refused = client.post(f"/runs/{live_run.pk}/reconfigure", {
        "kind": "rollback", "to_version": str(number), "reason": "x"}).content.decode()
    assert "other operators or edges" in refused
    assert live_run.reconfigurations.count() == 0


@pytest.mark.parametrize("panel", ["rebalance", "logic"])
@pytest.mark.parametrize("query", ["", "?operator=", "?operator=%20"])
def test_a_panel_without_an_operator_is_a_400_naming_the_parameter(
    session_client, live_run, panel, query
):
    response = session_client(Role.OPERATOR).get(f"/runs/{live_run.pk}/{panel}{query}")
    assert response.status_code == 400
    assert "?operator= is missing or empty" in response.content.decode()
