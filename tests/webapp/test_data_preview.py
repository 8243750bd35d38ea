"""The data preview on the real database and control channel: a request travels to the run's
driver as a sample command, the driver's answer (an ack with rows, delivered through the run's
host) is recorded and shown by the API and the run page; bad requests are refused with what is
wrong, and previews, being reads, leave no audit entry."""

from __future__ import annotations

import json

import pytest

from engine.api import Ack
from engine.runtime.control.channel import open_control_channel
from engine.runtime.control.messages import RowSample
from webapp.audit.models import AuditEntry
from webapp.jobs.models import RunStatus
from webapp.runs.driver import RunHost

pytestmark = pytest.mark.django_db

ROWS = RowSample(("campaign_id", "window_end", "views"),
                 ((7, "2026-11-29T02:00:10+00:00", 12), (9, "2026-11-29T02:00:10+00:00", None)))


def _ask(client, run_id: int, body) -> tuple[int, dict]:
    response = client.post(f"/api/runs/{run_id}/samples", data=json.dumps(body),
                           content_type="application/json")
    return response.status_code, response.json()


def _sent(run_id: int) -> dict[str, str]:
    """The last command on the run's control channel, as the driver reads it."""
    from django.conf import settings

    channel = open_control_channel(settings.REDIS_URL, str(run_id), "streamscale:")
    return channel.read_after(None, 0)[-1][1]


def _answer(run_id: int, request_id: str, **fields) -> None:
    """The driver's ack of a sample, through the run's host as a driver delivers it."""
    ack = Ack(request_id=request_id, kind="sample", operator="counts",
              **{"status": "applied", **fields})
    RunHost(run_id).acknowledge(str(run_id), ack)


def test_a_preview_asks_the_driver_and_shows_the_rows_it_answers(token_client, live_run):
    client = token_client("operator")
    audited = AuditEntry.objects.count()
    status, waiting = _ask(client, live_run.pk, {"operator": "counts"})
    assert status == 202 and waiting["status"] == "waiting"
    assert waiting["message"] == "waiting for the next epoch in which counts emits rows"
    assert waiting["rows"] == [] and waiting["epoch"] is None
    sent = _sent(live_run.pk)
    assert sent["kind"] == "sample" and sent["operator"] == "counts"

    _answer(live_run.pk, sent["request_id"], applied_epoch=14, sample=ROWS)
    served = client.get(f"/api/samples/{waiting['id']}").json()
    assert served["status"] == "served" and served["epoch"] == 14
    assert served["message"] == "2 rows counts emitted in epoch 14"
    assert served["columns"] == ["campaign_id", "window_end", "views"]
    assert served["rows"] == [[7, "2026-11-29T02:00:10+00:00", 12],
                              [9, "2026-11-29T02:00:10+00:00", None]]
    # A driver that took over sends the epoch's ack again, without rows: the answer stays.
    _answer(live_run.pk, sent["request_id"], applied_epoch=14)
    assert client.get(f"/api/samples/{waiting['id']}").json() == served
    assert AuditEntry.objects.count() == audited  # a read, as a change's preview


def test_no_rows_a_rejection_and_a_run_that_ended_are_said_in_words(token_client, live_run):
    client = token_client("admin")
    empty = _ask(client, live_run.pk, {"operator": "counts"})[1]
    _answer(live_run.pk, _sent(live_run.pk)["request_id"], applied_epoch=20,
            sample=RowSample(("campaign_id", "views")))
    answer = client.get(f"/api/samples/{empty['id']}").json()
    assert answer["status"] == "served" and answer["rows"] == []
    assert answer["message"] == "counts emitted no rows in the epochs up to 20"

    lost = _ask(client, live_run.pk, {"operator": "counts"})[1]
    _answer(live_run.pk, _sent(live_run.pk)["request_id"], applied_epoch=21)
    assert client.get(f"/api/samples/{lost['id']}").json()["message"] == (
        "no rows of counts: the run's driver restarted before it took the rows: ask again")

    orphan = _ask(client, live_run.pk, {"operator": "counts"})[1]
    live_run.status = RunStatus.STOPPED
    live_run.save(update_fields=["status"])
    answer = client.get(f"/api/samples/{orphan['id']}").json()
    assert answer["status"] == "failed"
    assert answer["message"] == f"no rows of counts: run {live_run.pk} is stopped"


@pytest.mark.parametrize(("body", "status", "error"), [
    ({"operator": "ghost"}, 400, "run {run} has no operator 'ghost'"),
    ({"operator": ""}, 400, None),
    ({}, 400, None),
])
def test_bad_requests_are_refused_with_what_is_wrong(token_client, live_run, body, status,
                                                     error):
    code, answer = _ask(token_client("operator"), live_run.pk, body)
    assert code == status, answer
    assert answer["problems"] and all(p["message"] for p in answer["problems"])
    if error is not None:
        assert answer["error"] == error.format(run=live_run.pk)
        assert answer["problems"] == [{"where": "field operator",
                                       "message": error.format(run=live_run.pk)}]
    assert not live_run.samples.exists()


def test_a_run_that_is_not_running_and_a_missing_one_are_refused(token_client, live_run):
    client = token_client("operator")
    live_run.status = RunStatus.STOPPED
    live_run.save(update_fields=["status"])
    code, answer = _ask(client, live_run.pk, {"operator": "counts"})
    assert code == 409
    assert answer["error"] == (f"run {live_run.pk} is stopped: only a running run can show "
                               "its data")
    code, answer = _ask(client, 999999, {"operator": "counts"})
    assert code == 404 and answer["error"] == "there is no run 999999"
    assert client.get("/api/samples/999999").json()["error"] == "there is no data preview 999999"


def test_the_run_page_asks_and_shows_the_answer_in_its_drill_down(session_client, live_run):
    page = session_client("operator")
    detail = page.get(f"/runs/{live_run.pk}/").content.decode()
    assert "Preview data" in detail and f'hx-post="/runs/{live_run.pk}/sample"' in detail
    waiting = page.post(f"/runs/{live_run.pk}/sample", {"operator": "counts"}).content.decode()
    assert "waiting for the next epoch in which counts emits rows" in waiting
    sample = live_run.samples.get()
    # It asks again until the answer comes.
    poll = f'hx-get="/runs/{live_run.pk}/samples/{sample.pk}"'
    assert poll in waiting
    _answer(live_run.pk, sample.request_id, applied_epoch=14, sample=ROWS)
    served = page.get(f"/runs/{live_run.pk}/samples/{sample.pk}").content.decode()
    assert poll not in served and "2 rows counts emitted in epoch 14" in served
    assert "<th scope=\"col\">window_end</th>" in served and "<td>12</td>" in served
    refused = page.post(f"/runs/{live_run.pk}/sample", {"operator": "ghost"}).content.decode()
    assert f"run {live_run.pk} has no operator &#x27;ghost&#x27;" in refused



@pytest.mark.parametrize("role", ["viewer", "editor"])
def test_roles_below_operator_are_neither_offered_nor_answered_a_preview(session_client, role,
                                                                         live_run):
    from webapp.samples.models import OperatorSample

    page = session_client(role)
    assert "Preview data" not in page.get(f"/runs/{live_run.pk}/").content.decode()
    sample = OperatorSample.objects.create(run=live_run, operator_id="counts", request_id="s")
    asked = page.post(f"/runs/{live_run.pk}/sample", {"operator": "counts"})
    shown = page.get(f"/runs/{live_run.pk}/samples/{sample.pk}")
    assert asked.status_code == shown.status_code == 403
    assert "this needs the operator role or higher" in asked.content.decode()
    assert live_run.samples.count() == 1


def test_the_api_documents_the_preview(token_client):
    schema = token_client("viewer").get("/api/schema").json()
    assert "/api/runs/{id}/samples" in schema["paths"] and "/api/samples/{id}" in schema["paths"]
    answer = schema["components"]["schemas"]["SampleOut"]["properties"]
    assert {"status", "message", "epoch", "columns", "rows"} <= set(answer)
