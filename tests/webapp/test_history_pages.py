"""History tells each story once and as it stands: a run's start shows the run's status now,
a change appears once (its request, with how it ended), what the product records on its own
is signed "system" rather than "policy", and the trail is read a page at a time."""

from __future__ import annotations

import re

import pytest

from webapp.accounts.roles import Role

pytestmark = pytest.mark.django_db


def _rows(page: str, action: str) -> list[str]:
    """Each History row of ``action``, its nested figures included."""
    table = page.split("</tbody>\n</table>")[0]
    return [chunk for chunk in table.split('<tr data-action="')[1:]
            if chunk.startswith(f'{action}"')]


def _outcome(row: str) -> str:
    return re.findall(r'<span class="status status-r-[^"]*">([^<]*)</span>', row)[-1]


def test_a_run_start_shows_the_run_s_status_now(session_client, live_run):
    from webapp.audit.services import audit_record
    from webapp.jobs.models import RunStatus, Trigger
    from webapp.runs.services import run_status_set

    audit_record(actor=None, trigger=Trigger.USER, action="run.started", subject=live_run,
                 outcome="requested")
    client = session_client(Role.VIEWER)
    [row] = _rows(client.get("/history/").content.decode(), "run.started")
    assert _outcome(row) == "running"
    run_status_set(run_id=live_run.pk, status=RunStatus.STOPPED)
    [row] = _rows(client.get("/history/").content.decode(), "run.started")
    assert _outcome(row) == "stopped"
    running = client.get("/history/?outcome=running").content.decode()
    assert not _rows(running, "run.started")


def test_a_change_appears_once_and_what_the_product_records_is_signed_system(
    session_client, live_run
):
    from webapp.jobs.models import RunStatus
    from webapp.runs.services import run_status_set

    session_client(Role.OPERATOR).post(f"/runs/{live_run.pk}/reconfigure", {
        "kind": "rescale", "operator": "counts", "parallelism": "3", "reason": "more room"})
    # The run fails before the change took effect: the change ends failed, and the trail
    # records both endings.
    run_status_set(run_id=live_run.pk, status=RunStatus.FAILED, detail="the driver died")
    from webapp.audit.models import AuditEntry

    ended = AuditEntry.objects.get(action="reconfiguration.failed")
    assert (ended.actor_name, ended.trigger) == ("system", "system")
    page = session_client(Role.VIEWER).get("/history/").content.decode()
    [request] = _rows(page, "reconfiguration.rescale")
    assert _outcome(request) == "failed" and "operator-session" in request
    assert not _rows(page, "reconfiguration.failed")
    [failed] = _rows(page, "run.failed")
    assert "system" in failed and "policy" not in failed


def test_history_is_read_a_page_at_a_time(session_client, live_run):
    from webapp.audit.services import audit_record
    from webapp.pages.selectors import HISTORY_PAGE

    for i in range(HISTORY_PAGE + 20):
        audit_record(actor=None, trigger="policy", action="test.entry", subject=live_run.job,
                     reason=f"entry {i}")
    client = session_client(Role.VIEWER)
    first = client.get("/history/?action=test.entry").content.decode()
    assert len(_rows(first, "test.entry")) == HISTORY_PAGE
    assert f"entry {HISTORY_PAGE + 19}<" in first and "entry 0<" not in first
    assert 'rel="next"' in first and 'rel="prev"' not in first
    assert "action=test.entry&amp;page=2" in first
    # Times say their time zone.
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z+0-9]{2,6}</time>", first)
    second = client.get("/history/?action=test.entry&page=2").content.decode()
    assert len(_rows(second, "test.entry")) == 20
    assert "entry 0<" in second and 'rel="prev"' in second and 'rel="next"' not in second
