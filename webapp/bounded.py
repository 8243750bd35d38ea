"""A fixed number of request threads for the web server, each with its own lasting connection.

Django's ASGI handler runs every request's sync code (middleware, views) on a thread made for
that request, so a burst of N requests opens N database connections at once and reconnects for
each request. `BoundedWorkers` instead hands each HTTP request one of `threads` long-lived
worker threads: the web server then never holds more than `threads` connections, each kept
open between requests (`CONN_MAX_AGE`, checked by `CONN_HEALTH_CHECKS`).
`BoundedWorkers(connect=connect_thread)` opens them as the server starts, so that no request
waits for one to be made.

`ThreadedDjango` is the Django application such a thread runs: each request's middleware and
view as one synchronous call, as under WSGI, rather than Django's ASGI handler's hops between
the thread and the event loop.

A request waits for a free thread in arrival order. When `queue` requests are already waiting,
or a request has waited `wait_s`, it is answered at once with 503 and `Retry-After` (JSON under
/api/) instead of piling up: the answer costs no thread and no connection.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.http import HttpResponse
from django.urls import set_script_prefix

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]

RETRY_AFTER_S = 1


def connect_thread() -> None:
    """Opens this worker thread's connection now rather than at its first request; a
    failure is left to that request, which reconnects and reports it."""
    from django.db import DatabaseError, connection

    try:
        connection.ensure_connection()
    except DatabaseError:
        pass


def _close_thread_connection() -> None:
    from django.db import connection

    connection.close()


class ThreadedDjango(ASGIHandler):
    """Django's ASGI handler with its middleware loaded for synchronous calls: a request's
    signals, middleware and view run in one call on the request's thread, and its answer is
    sent from the event loop.

    Django's own handler loads the middleware for asynchronous calls: with our synchronous
    middleware around its asynchronous core, a request crosses between its thread and the
    event loop six times (the start signal, into the middleware, out to the core, in to the
    view, back out, the closing), each crossing a wake-up of the other side with the
    interpreter lock changing hands.
    A response whose content is in memory is closed on that call too (the request's end:
    Django's handler crosses once more for it after sending); a streamed one after sending.
    A client's disconnect no longer cancels the view: a synchronous view runs to its end
    whatever its caller does.
    """

    def __init__(self) -> None:
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        try:
            response = await sync_to_async(self._respond, thread_sensitive=True)(
                scope, body_file)
            try:
                await self.send_response(response, send)
            finally:
                if response.streaming:  # its content is read as it is sent: closed after
                    await sync_to_async(response.close, thread_sensitive=True)()
        finally:
            body_file.close()

    def _respond(self, scope: Scope, body_file: Any) -> HttpResponse:
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, refusal = self.create_request(scope, body_file)
        if request is None:
            return refusal
        response = self.get_response(request)
        response._handler_class = self.__class__  # type: ignore[attr-defined]
        if not response.streaming:
            # Its content is in memory: closed here (the request's end, which returns the
            # thread's connection), one crossing to this thread fewer than after sending.
            response.close()
        return response


class BoundedWorkers:
    """ASGI middleware: HTTP requests run `app` on one of `threads` worker threads."""

    def __init__(self, app: Asgi, *, threads: int, queue: int, wait_s: float,
                 connect: Callable[[], None] | None = None) -> None:
        """``connect``, if given, runs once on every worker thread as the server starts
        (``connect_thread``: no request then waits for a connection to be made)."""
        if threads < 1 or queue < 0 or wait_s <= 0:
            raise ValueError("threads >= 1, queue >= 0 and wait_s > 0 are required")
        self.app, self.threads, self.queue, self.wait_s = app, threads, queue, wait_s
        self._executors = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"request-{i}")
            for i in range(threads)]
        self.connecting = [e.submit(connect) for e in self._executors] if connect else []
        self._free: asyncio.Queue[ThreadPoolExecutor] | None = None
        self.waiting = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        executor = await self._checkout()
        if executor is None:
            await _busy(scope, send, self.waiting)
            return
        try:
            # Every thread-sensitive call of this request (Django's sync middleware, the view,
            # the request signals that close stale connections) runs on this one thread.
            async with ThreadSensitiveContext(executor=executor):
                await self.app(scope, receive, send)
        finally:
            self._pool().put_nowait(executor)

    async def _checkout(self) -> ThreadPoolExecutor | None:
        """A free worker thread, or None if the queue is full or the wait too long."""
        free = self._pool()
        if not free.empty():
            return free.get_nowait()
        if self.waiting >= self.queue:
            return None
        self.waiting += 1
        try:
            return await asyncio.wait_for(free.get(), self.wait_s)
        except TimeoutError:
            return None
        finally:
            self.waiting -= 1

    def shutdown(self) -> None:
        """Closes the worker threads' connections and ends the threads."""
        for executor in self._executors:
            executor.submit(_close_thread_connection).result()
            executor.shutdown()

    def _pool(self) -> asyncio.Queue[ThreadPoolExecutor]:
        # Made on first use, inside the server's event loop.
        if self._free is None:
            self._free = asyncio.Queue()
            for executor in self._executors:
                self._free.put_nowait(executor)
        return self._free


async def _busy(scope: Scope, send: Send, waiting: int) -> None:
    """503 with Retry-After; JSON for the API, plain text for pages. The body is drained by the
    server; nothing of the request was done."""
    message = (f"the server is busy ({waiting} requests are waiting); "
               f"retry in {RETRY_AFTER_S} s")
    if scope.get("path", "").startswith("/api/"):
        body = json.dumps({"error": message, "problems": []}).encode()
        kind = b"application/json"
    else:
        body, kind = message.encode(), b"text/plain; charset=utf-8"
    await send({"type": "http.response.start", "status": 503, "headers": [
        (b"content-type", kind), (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(RETRY_AFTER_S).encode())]})
    await send({"type": "http.response.body", "body": body})
