"""The web server's fixed request threads: requests wait their turn in order, run one per
thread, and past the queue get 503 with Retry-After at once (JSON under /api/)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from tests.webapp.support import run_alone
from webapp.bounded import BoundedWorkers


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
    assert "busy" in json.loads(body)["error"]
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
