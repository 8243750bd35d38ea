"""Websockets: authenticated and origin-checked; events sent from another process reach clients."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from channels.testing import WebsocketCommunicator

from tests.webapp.support import ROOT, child_env
from webapp.accounts.roles import Role
from webapp.asgi import application
from webapp.live.events import EVENT_FIELDS, job_event_publish

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://127.0.0.1:8000")
HOST = (b"host", b"127.0.0.1:8000")  # the server the socket is opened on, as browsers send it


def _communicator(job_id: int, *, token: str | None = None, origin=ORIGIN):
    headers = [HOST, origin] if origin else [HOST]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    return WebsocketCommunicator(application, f"/ws/jobs/{job_id}/", headers=headers)


def _token(make_user, role: str) -> str:
    from webapp.accounts.services import api_token_create

    return api_token_create(user=make_user(role, name=f"ws-{role}"))


async def _connect(communicator):
    connected, code = await communicator.connect(timeout=5)
    return connected, code


async def _greeted(job_id: int, token: str):
    """A socket on the job's live feed with ``token``, connected and past its hello."""
    communicator = _communicator(job_id, token=token)
    assert (await _connect(communicator))[0]
    await communicator.receive_json_from(timeout=5)
    return communicator


async def _refusal_code(communicator) -> int:
    """A refused socket is accepted, then closed at once: the close code it carries."""
    connected, _ = await _connect(communicator)
    assert connected, "refusals must accept, then close with a code (not HTTP 403)"
    message = await communicator.receive_output(timeout=5)
    assert message["type"] == "websocket.close", message
    return message["code"]


def _run(coro):
    from asgiref.sync import async_to_sync

    return async_to_sync(coro)()


def test_event_from_another_process_reaches_the_client(make_user, job):
    token = _token(make_user, Role.VIEWER)

    async def scenario():
        communicator = _communicator(job.pk, token=token)
        connected, _ = await _connect(communicator)
        assert connected
        assert await communicator.receive_json_from(timeout=5) == {"type": "hello", "job": job.pk}
        event = {"type": "run.status", "job": job.pk, "run": 7, "status": "running", "epoch": 3}
        code = (
            "import django, json, sys; django.setup();"
            "from webapp.live.events import job_event_send;"
            f"job_event_send(job_id={job.pk}, event=json.loads(sys.argv[1]))"
        )
        sender = subprocess.run(
            [sys.executable, "-c", code, json.dumps(event)], cwd=ROOT, env=child_env(),
            capture_output=True, text=True, timeout=60,
        )
        assert sender.returncode == 0, sender.stderr
        assert await communicator.receive_json_from(timeout=10) == event
        await communicator.disconnect()

    _run(scenario)


@pytest.mark.parametrize(
    ("case", "expected_code"),
    [("anonymous", 4401), ("bad-origin", 4403), ("unknown-job", 4404)],
)
def test_refused_connections_are_accepted_then_closed_with_their_code(
    make_user, job, case, expected_code
):
    token = None if case == "anonymous" else _token(make_user, Role.VIEWER)
    origin = (b"origin", b"http://evil.example") if case == "bad-origin" else ORIGIN
    job_id = 999999 if case == "unknown-job" else job.pk

    async def scenario():
        return await _refusal_code(_communicator(job_id, token=token, origin=origin))

    assert _run(scenario) == expected_code


@pytest.mark.parametrize("origin", [
    b"http://127.0.0.1:9999",  # another port of the same host: same site, the cookie is sent
    b"https://127.0.0.1:8000",  # another scheme
    b"http://localhost:8000",  # another host, though an allowed one
    b"http://127.0.0.1",
    b"null",
])
def test_a_page_from_another_origin_cannot_open_a_socket(make_user, job, origin):
    token = _token(make_user, Role.VIEWER)

    async def scenario():
        return await _refusal_code(_communicator(job.pk, token=token, origin=(b"origin", origin)))

    assert _run(scenario) == 4403


def test_a_socket_without_a_host_or_with_a_host_not_allowed_is_refused(make_user, job):
    token = _token(make_user, Role.VIEWER)
    auth = (b"authorization", f"Bearer {token}".encode())

    async def scenario():
        codes = []
        for headers in ([ORIGIN, auth],
                        [(b"host", b"evil.example:8000"), (b"origin", b"http://evil.example:8000"),
                         auth]):
            communicator = WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/",
                                                 headers=headers)
            codes.append(await _refusal_code(communicator))
        return codes

    assert _run(scenario) == [4403, 4403]


def test_the_products_own_origin_is_accepted_behind_tls(make_user, job, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    token = _token(make_user, Role.VIEWER)

    async def scenario():
        communicator = WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/", headers=[
            (b"host", b"127.0.0.1:8000"), (b"origin", b"https://127.0.0.1:8000"),
            (b"x-forwarded-proto", b"https"), (b"authorization", f"Bearer {token}".encode())])
        assert (await _connect(communicator))[0]
        hello = await communicator.receive_json_from(timeout=5)
        await communicator.disconnect()
        return hello

    assert _run(scenario) == {"type": "hello", "job": job.pk}


def test_malformed_messages_get_an_error_and_the_socket_stays_open(make_user, job):
    token = _token(make_user, Role.VIEWER)

    async def scenario():
        communicator = await _greeted(job.pk, token)
        await communicator.send_to(text_data="{not json")
        assert (await communicator.receive_json_from(timeout=5))["type"] == "error"
        await communicator.send_to(text_data=json.dumps({"type": "subscribe-all"}))
        assert (await communicator.receive_json_from(timeout=5))["type"] == "error"
        await communicator.send_json_to({"type": "ping"})
        assert await communicator.receive_json_from(timeout=5) == {"type": "pong"}
        await communicator.disconnect()

    _run(scenario)


def test_version_created_event_has_its_schema_and_follows_commit(
    make_user, token_client, job, simple_dag
):
    client = token_client(Role.EDITOR)
    viewer_token = _token(make_user, Role.VIEWER)

    async def scenario():
        communicator = await _greeted(job.pk, viewer_token)
        from channels.db import database_sync_to_async

        response = await database_sync_to_async(client.post)(
            f"/api/jobs/{job.pk}/versions",
            data=json.dumps({"dag": simple_dag, "base_version": 1, "comment": "live"}),
            content_type="application/json",
        )
        assert response.status_code == 201
        event = await communicator.receive_json_from(timeout=10)
        assert event["type"] == "job.version_created"
        assert set(event) - {"type"} == EVENT_FIELDS["job.version_created"]
        assert event["version"] == 2 and event["author"] == "editor-token"
        await communicator.disconnect()

    _run(scenario)


def test_event_shapes_are_enforced():
    with pytest.raises(ValueError, match="fields"):
        job_event_publish(job_id=1, event={"type": "run.status", "job": 1})
    with pytest.raises(ValueError, match="unknown"):
        job_event_publish(job_id=1, event={"type": "nope"})


def test_run_socket_sends_a_snapshot_then_small_epoch_deltas(make_user, live_run):
    from tests.webapp.conftest import epoch_metrics
    from webapp.jobs.metrics import run_epoch_record
    from webapp.runs.live import run_epoch_publish

    run_epoch_record(run_id=live_run.pk, metrics=epoch_metrics(9, counts_in=500,
                                                               counts_capacity=2000))
    token = _token(make_user, Role.VIEWER)

    async def scenario():
        communicator = WebsocketCommunicator(
            application, f"/ws/runs/{live_run.pk}/",
            headers=[HOST, ORIGIN, (b"authorization", f"Bearer {token}".encode())])
        assert (await _connect(communicator))[0]
        snapshot = await communicator.receive_json_from(timeout=5)
        assert snapshot["type"] == "snapshot" and snapshot["run"]["status"] == "running"
        assert [epoch for epoch, _ in snapshot["epochs"]] == [9]
        assert snapshot["epochs"][0][1]["ops"]["counts"][0] == 2
        assert snapshot["live_fields"][0] == "instances"
        from channels.db import database_sync_to_async

        await database_sync_to_async(run_epoch_publish)(
            run_id=live_run.pk, metrics=epoch_metrics(10, counts_in=600, counts_capacity=2000))
        delta = await communicator.receive_json_from(timeout=5)
        assert delta["type"] == "run.epoch" and delta["epoch"] == 10
        assert delta["metrics"]["ops"]["counts"][0] == 2  # instances
        assert len(json.dumps(delta)) < 600
        await communicator.disconnect()

    _run(scenario)


def test_run_socket_refuses_anonymous_and_unknown_runs(make_user, live_run):
    token = _token(make_user, Role.VIEWER)

    async def scenario():
        for path, headers, code in [
            (f"/ws/runs/{live_run.pk}/", [HOST, ORIGIN], 4401),
            ("/ws/runs/999999/",
             [HOST, ORIGIN, (b"authorization", f"Bearer {token}".encode())], 4404),
        ]:
            communicator = WebsocketCommunicator(application, path, headers=headers)
            assert await _refusal_code(communicator) == code

    _run(scenario)


def test_an_idle_subscriber_still_receives_later_events(make_user, job):
    """The channel layer's blocking reads must survive quiet periods (no event for a while)."""
    import asyncio

    token = _token(make_user, Role.VIEWER)

    async def scenario():
        communicator = await _greeted(job.pk, token)
        await asyncio.sleep(12)
        event = {"type": "run.status", "job": job.pk, "run": 1, "status": "running", "epoch": 1}
        from channels.db import database_sync_to_async

        await database_sync_to_async(job_event_publish)(job_id=job.pk, event=event)
        assert await communicator.receive_json_from(timeout=10) == event
        await communicator.disconnect()

    _run(scenario)


def test_live_epoch_carries_offered_load_backlog_trend_regions_and_bottleneck():
    from webapp.runs.live import LIVE_FIELDS, live_metrics

    metrics = {
        "epoch": 4, "batch_duration_ms": 900.0, "backlog_rows": 5000, "latency_ms": {},
        "sources": {"events": {"offered_rate": 3000.0, "backlog_growth_per_s": 1200.0}},
        "regions": {"events+views": {"operators": ["events", "views"], "busy_ms": [300.0, 420.0],
                                     "processing_rate": 9000.0}},
        "bottleneck": "counts",
        "operators": {
            "views": {"instances": 2, "rows_in": 10, "rows_out": 8, "busy_ms": None,
                      "processing_rate": None, "region": "events+views", "demand_rate": 2400.0},
            "counts": {"instances": 1, "rows_in": 8, "rows_out": 2, "busy_ms": [800.0],
                       "processing_rate": 1000.0, "region": None, "demand_rate": 2400.0,
                       "congested": True},
        },
    }
    live = live_metrics(metrics, at=1.0)
    assert (live["offered"], live["growth"], live["bottleneck"]) == (3000.0, 1200.0, "counts")
    views = dict(zip(LIVE_FIELDS, live["ops"]["views"], strict=True))
    assert views["region"] == "events+views"
    assert views["busy"] == 420.0 and views["processing_rate"] == 9000.0  # the region's
    counts = dict(zip(LIVE_FIELDS, live["ops"]["counts"], strict=True))
    assert counts["busy"] == 800.0 and counts["congested"] and counts["region"] is None
