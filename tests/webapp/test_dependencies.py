"""With Redis down, requests that need it answer 503 with the reason (never a server error),
a reconfiguration is recorded as failed, websocket handshakes are refused cleanly, and
``/healthz`` reports each dependency."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis
from channels.testing import WebsocketCommunicator
from django.test import Client

from webapp.accounts.roles import Role

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def redis_down(settings) -> str:
    """Point every Redis client of the web application at a port where nothing listens."""
    url = _port_where_nothing_listens()
    settings.REDIS_URL = url
    layers = json.loads(json.dumps(settings.CHANNEL_LAYERS))
    layers["default"]["CONFIG"]["hosts"] = [url]
    settings.CHANNEL_LAYERS = layers
    return url


def test_healthz_reports_each_dependency(celery_worker_process):
    from webapp.runs.tasks import runs_watch

    runs_watch.delay()  # as beat sends it: the worker's run of it is beat's sign of life
    deadline = time.monotonic() + 60
    while (response := Client().get("/healthz")).status_code != 200:
        assert time.monotonic() < deadline, response.json()
        time.sleep(0.2)

    body = response.json()
    assert body["status"] == "ok"
    assert set(body["checks"]) == {"database", "redis", "celery_worker", "celery_beat"}
    assert body["checks"]["database"]["ok"] and body["checks"]["redis"]["ok"]


def test_healthz_names_redis_when_it_is_down(redis_down):
    response = Client().get("/healthz")

    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["database"]["ok"] is True
    assert checks["redis"]["ok"] is False and "ConnectionError" in checks["redis"]["error"]
    assert checks["redis"]["ms"] < 1000  # within the check's timeout: no retries
    assert checks["celery_worker"] == {"ok": False, "error": "unknown: its broker (Redis) is down"}
    assert checks["celery_beat"] == checks["celery_worker"]


def test_a_rescale_with_redis_down_is_503_with_the_reason_and_recorded_failed(
    token_client, live_run, redis_down
):
    from webapp.jobs.models import Reconfiguration

    response = token_client(Role.OPERATOR).post(
        f"/api/runs/{live_run.pk}/reconfigurations", content_type="application/json",
        data=json.dumps({"kind": "rescale", "operator": "counts", "parallelism": 3,
                         "reason": "redis is down", "request_id": "down-1"}))

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json()["error"].startswith("Redis (REDIS_URL) is unreachable: ")
    record = Reconfiguration.objects.get(request_id="down-1")
    assert record.status == "failed" and record.status_reason.startswith("could not deliver: ")


def test_a_rescale_that_could_not_be_delivered_is_retried_under_the_same_request_id(
    token_client, live_run, settings
):
    from webapp.jobs.models import Reconfiguration

    client = token_client(Role.OPERATOR)
    body = json.dumps({"kind": "rescale", "operator": "counts", "parallelism": 3,
                       "reason": "retry me", "request_id": "retry-1"})
    path = f"/api/runs/{live_run.pk}/reconfigurations"
    reachable = settings.REDIS_URL
    settings.REDIS_URL = _port_where_nothing_listens()
    down = client.post(path, content_type="application/json", data=body)
    assert down.status_code == 503 and down["Retry-After"] == "5"
    settings.REDIS_URL = reachable

    retry = client.post(path, content_type="application/json", data=body)
    again = client.post(path, content_type="application/json", data=body)

    assert retry.status_code == 202, retry.content
    assert retry.json()["status"] == "requested" and retry.json()["created"] is True
    assert again.status_code == 202
    assert (again.json()["id"], again.json()["created"]) == (retry.json()["id"], False)
    records = Reconfiguration.objects.filter(run=live_run).order_by("pk")
    assert [(r.status, r.request["request_id"]) for r in records] == [
        ("failed", "retry-1"), ("pending", "retry-1")]
    assert records[1].request_id == "retry-1"


def test_a_request_id_cannot_take_the_prefix_kept_for_undelivered_requests(
    token_client, live_run
):
    response = token_client(Role.OPERATOR).post(
        f"/api/runs/{live_run.pk}/reconfigurations", content_type="application/json",
        data=json.dumps({"kind": "rescale", "operator": "counts", "parallelism": 3,
                         "reason": "x", "request_id": "undelivered:1"}))
    assert response.status_code == 400
    assert "must not start with 'undelivered:'" in response.content.decode()


def _port_where_nothing_listens() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


def test_a_run_start_with_redis_down_is_503_and_the_run_fails_naming_why(
    token_client, job, redis_down, settings
):
    from webapp.celery import app
    from webapp.jobs.models import Run, RunStatus

    def use_broker(url: str) -> None:  # connections made earlier in this process are pooled
        app.conf.broker_url = url
        app.pool.force_close_all()
        app._pool = None
        app.amqp._producer_pool = None

    retries = app.conf.broker_connection_max_retries
    use_broker(redis_down)
    app.conf.broker_connection_max_retries = 0
    try:
        response = token_client(Role.OPERATOR).post(
            f"/api/jobs/{job.pk}/runs", data="{}", content_type="application/json")
    finally:
        app.conf.broker_connection_max_retries = retries
        use_broker(settings.CELERY_BROKER_URL)

    assert response.status_code == 503
    run = Run.objects.get(job=job)
    assert run.status == RunStatus.FAILED
    assert run.failure_reason.startswith(
        "its launch could not be enqueued: Redis (REDIS_URL) is unreachable: ")


def test_a_stop_with_redis_down_is_503_not_a_server_error(token_client, live_run, redis_down):
    response = token_client(Role.OPERATOR).post(
        f"/api/runs/{live_run.pk}/stop", data=json.dumps({"reason": "redis is down"}),
        content_type="application/json")

    assert response.status_code == 503
    assert "Redis (REDIS_URL) is unreachable" in response.json()["error"]


def test_a_websocket_handshake_with_redis_down_is_refused_cleanly(make_user, live_run, redis_down):
    from asgiref.sync import async_to_sync

    from webapp.accounts.services import api_token_create
    from webapp.asgi import application

    token = api_token_create(user=make_user(Role.VIEWER, name="ws-viewer"))

    async def handshake():
        communicator = WebsocketCommunicator(
            application, f"/ws/runs/{live_run.pk}/", headers=_socket_headers(token))
        connected, _ = await communicator.connect(timeout=10)
        return connected, await communicator.receive_output(timeout=5)

    # accepted, then closed with the code: a refused handshake would reach clients as HTTP 403
    assert async_to_sync(handshake)() == (True, {"type": "websocket.close", "code": 1013})


def _socket_headers(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"host", b"127.0.0.1:8000"), (b"origin", b"http://127.0.0.1:8000"),
            (b"authorization", f"Bearer {token}".encode())]


@pytest.fixture
def mortal_redis(settings) -> Iterator[subprocess.Popen]:
    """A Redis of this test's own for the channel layer, which the test may kill."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no"], stdout=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            assert time.monotonic() < deadline and server.poll() is None, "redis did not start"
            time.sleep(0.05)
    layers = json.loads(json.dumps(settings.CHANNEL_LAYERS))
    layers["default"]["CONFIG"]["hosts"] = [f"redis://127.0.0.1:{port}/0"]
    settings.CHANNEL_LAYERS = layers
    yield server
    server.kill()
    server.wait()


def test_an_open_socket_is_closed_with_1013_when_redis_dies(make_user, job, mortal_redis):
    from asgiref.sync import async_to_sync

    from webapp.accounts.services import api_token_create
    from webapp.asgi import application

    token = api_token_create(user=make_user(Role.VIEWER, name="ws-viewer"))

    async def scenario():
        communicator = WebsocketCommunicator(
            application, f"/ws/jobs/{job.pk}/", headers=_socket_headers(token))
        assert (await communicator.connect(timeout=10))[0]
        assert (await communicator.receive_json_from(timeout=5))["type"] == "hello"
        mortal_redis.kill()
        mortal_redis.wait()
        # Before: the channel layer's error escaped the application ("Exception in ASGI
        # application") and the connection dropped without a close frame.
        return await communicator.receive_output(timeout=10)

    assert async_to_sync(scenario)() == {"type": "websocket.close", "code": 1013}
