"""The web server's fixed request threads: requests wait their turn in order, run one per
thread, and past the queue get 503 with Retry-After at once (JSON under /api/)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from tests.webapp.support import run_alone
from webapp.accounts.roles import Role
from webapp.bounded import BoundedWorkers, ThreadedDjango


class Gate:
    """An app that holds each request until released, noting the thread it ran on."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.threads: list[str] = []
        self.running = 0
        self.most = 0

    async def __call__(self, scope, receive, send):
        from asgiref.sync import sync_to_async

        self.running += 1
        self.most = max(self.most, self.running)
        self.threads.append(await sync_to_async(lambda: threading.current_thread().name)())
        await self.release.wait()
        self.running -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def _request(app, path: str) -> tuple[int, dict, bytes]:
    answer: dict = {}

    async def send(message):
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = dict(message["headers"])
        else:
            answer["body"] = message["body"]

    async def receive():
        return {"type": "http.request", "body": b""}

    await app({"type": "http", "path": path}, receive, send)
    return answer["status"], answer["headers"], answer["body"]


def test_past_the_queue_requests_get_503_with_retry_after_and_the_rest_are_served():
    async def scenario():
        gate = Gate()
        app = BoundedWorkers(gate, threads=2, queue=3, wait_s=30)
        held = [asyncio.create_task(_request(app, f"/api/runs/{i}")) for i in range(5)]
        await asyncio.sleep(0.2)
        refused_api = await _request(app, "/api/runs/1")
        refused_page = await _request(app, "/jobs/")
        gate.release.set()
        return gate, await asyncio.gather(*held), refused_api, refused_page

    gate, served, (status, headers, body), (page_status, page_headers, page_body) = \
        run_alone(scenario())
    assert [s for s, _, _ in served] == [200] * 5
    assert gate.most == 2  # never more requests running than threads
    assert set(gate.threads) <= {"request-0_0", "request-1_0"}
    assert status == 503 and headers[b"retry-after"] == b"1"
    assert headers[b"content-type"] == b"application/json"
    assert "busy" in json.loads(body)["error"] and json.loads(body)["problems"] == []
    assert page_status == 503 and page_headers[b"retry-after"] == b"1"
    assert page_headers[b"content-type"].startswith(b"text/plain")


def test_a_request_waiting_too_long_gets_503():
    async def scenario():
        gate = Gate()
        app = BoundedWorkers(gate, threads=1, queue=10, wait_s=0.3)
        first = asyncio.create_task(_request(app, "/api/jobs"))
        await asyncio.sleep(0.05)
        waited = await _request(app, "/api/jobs")
        gate.release.set()
        return await first, waited

    first, waited = run_alone(scenario())
    assert first[0] == 200 and waited[0] == 503


def test_websockets_pass_through_unbounded():
    seen = []

    async def app(scope, receive, send):
        seen.append(scope["type"])

    bounded = BoundedWorkers(app, threads=1, queue=1, wait_s=1)
    run_alone(bounded({"type": "websocket", "path": "/ws/"}, None, None))
    assert seen == ["websocket"]


def test_nonsense_bounds_are_refused():
    with pytest.raises(ValueError, match="threads"):
        BoundedWorkers(lambda *a: None, threads=0, queue=1, wait_s=1)


def _backend_pids(workers: BoundedWorkers, requests: int) -> list[int]:
    """The Postgres backend that served each of ``requests`` sequential API requests."""
    from django.core.signals import request_finished
    from django.db import connection

    pids: list[int] = []

    def note(**_):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pids.append(cursor.fetchone()[0])

    async def go():
        for _ in range(requests):
            # A task per request, as the server makes one per connection: a fresh context.
            status, _, _ = await asyncio.create_task(
                _request_with(workers, "/api/jobs", b"Bearer not-a-token"))
            assert status == 401

    request_finished.connect(note, weak=False)
    try:
        run_alone(go())
    finally:
        request_finished.disconnect(note)
        workers.shutdown()
    return pids


async def _request_with(app, path: str, authorization: bytes) -> tuple[int, dict, bytes]:
    answer: dict = {}
    sent = False

    async def send(message):
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        elif message["type"] == "http.response.body":
            answer["body"] = answer.get("body", b"") + message.get("body", b"")

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)  # the client stays connected

    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "scheme": "http", "http_version": "1.1",
             "headers": [(b"authorization", authorization), (b"host", b"localhost")],
             "server": ("localhost", 80), "client": ("127.0.0.1", 5000)}
    await app(scope, receive, send)
    return answer["status"], {}, answer.get("body", b"")


@pytest.mark.django_db(transaction=True)
def test_a_request_thread_keeps_one_database_connection_across_requests():
    pids = _backend_pids(BoundedWorkers(ThreadedDjango(), threads=1, queue=4, wait_s=5), 3)
    assert len(pids) == 3 and len(set(pids)) == 1, pids


@pytest.mark.django_db(transaction=True)
def test_connect_opens_each_thread_connection_before_any_request_and_requests_use_it():
    from django.db import connection

    from webapp.bounded import connect_thread

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        before = cursor.fetchone()[0]
    workers = BoundedWorkers(ThreadedDjango(), threads=2, queue=4, wait_s=5, connect=connect_thread)
    try:
        for future in workers.connecting:
            future.result(timeout=10)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
            assert cursor.fetchone()[0] == before + 2
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
            opened = {row[0] for row in cursor.fetchall()}
    except BaseException:
        workers.shutdown()
        raise
    assert set(_backend_pids(workers, 4)) <= opened


@pytest.mark.django_db(transaction=True)
def test_a_request_crosses_between_its_thread_and_the_event_loop_once(token_client, live_run):
    """With its answer: its middleware, signals, view and the closing of an answer held in
    memory run in one call on its thread (Django's own ASGI handler crossed back to the loop
    in the middle and to close the answer, six crossings in all)."""
    workers = BoundedWorkers(ThreadedDjango(), threads=1, queue=4, wait_s=5)
    token = token_client(Role.VIEWER).defaults["HTTP_AUTHORIZATION"].split()[1]
    path = f"/api/runs/{live_run.pk}"

    async def crossings() -> list[int]:
        loop, loop_thread = asyncio.get_running_loop(), threading.current_thread()
        woken = 0
        wake = loop.call_soon_threadsafe

        def counted(*args, **kwargs):
            nonlocal woken
            if threading.current_thread() is not loop_thread:
                woken += 1
            return wake(*args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        counts = []
        for _ in range(3):  # the first request also opens the thread's connection
            woken = 0
            status, _, body = await asyncio.create_task(
                _request_with(workers, path, f"Bearer {token}".encode()))
            assert status == 200, body
            assert json.loads(body)["id"] == live_run.pk
            counts.append(woken)
        return counts

    try:
        assert run_alone(crossings())[1:] == [1, 1]
    finally:
        workers.shutdown()
