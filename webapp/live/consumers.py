"""Websocket transport only: authenticate, join the job's group, forward its events."""

from __future__ import annotations

import json

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from webapp.accounts.roles import Permission
from webapp.dependencies import REDIS_DOWN
from webapp.live.events import job_group, run_group
from webapp.live.refusals import (
    CLOSE_FORBIDDEN,
    CLOSE_NOT_FOUND,
    CLOSE_TRY_AGAIN,
    CLOSE_UNAUTHENTICATED,
)


class JobConsumer(AsyncWebsocketConsumer):
    """`/ws/jobs/<id>/`: live events of one job for users allowed to read it.

    Refusals accept, then close with their code (webapp.live.refusals says why).
    """

    accepted = False

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except REDIS_DOWN:
            # The channel layer's read failed under an open socket: end it with a close frame
            # the client can act on (reconnect later) instead of a dropped connection.
            if not self.accepted:
                await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": CLOSE_TRY_AGAIN})

    async def accept(self, subprotocol: str | None = None, headers=None) -> None:
        await super().accept(subprotocol, headers)
        self.accepted = True

    async def refuse(self, code: int) -> None:
        await self.accept()
        await self.close(code=code)

    async def connect(self) -> None:
        self.job_id = int(self.scope["url_route"]["kwargs"]["job_id"])
        if not await self._may_read():
            return
        if not await _job_exists(self.job_id):
            await self.refuse(CLOSE_NOT_FOUND)
            return
        if not await self._join(job_group(self.job_id)):
            return
        await self.accept()
        await self._send({"type": "hello", "job": self.job_id})

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            try:
                await self.channel_layer.group_discard(self.group, self.channel_name)
            except REDIS_DOWN:
                pass  # the group's membership expires with Redis's own data

    async def _may_read(self) -> bool:
        """Whether the user may read; else the socket is refused (4401 or 4403)."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_UNAUTHENTICATED)
            return False
        if not user.can(Permission.READ):
            await self.refuse(CLOSE_FORBIDDEN)
            return False
        return True

    async def _join(self, group: str) -> bool:
        """Join ``group``; with Redis down, refuse the socket cleanly (1013) instead."""
        try:
            await self.channel_layer.group_add(group, self.channel_name)
        except REDIS_DOWN:
            await self.refuse(CLOSE_TRY_AGAIN)
            return False
        self.group = group
        return True

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            message = json.loads(text_data or "")
        except ValueError:
            await self._send({"type": "error", "error": "messages must be JSON objects"})
            return
        if not isinstance(message, dict) or message.get("type") != "ping":
            await self._send({"type": "error", "error": 'unknown message: send {"type": "ping"}'})
            return
        await self._send({"type": "pong"})

    async def job_event(self, message: dict) -> None:
        await self._send(message["event"])

    async def _send(self, payload: dict) -> None:
        await self.send(text_data=json.dumps(payload, separators=(",", ":")))


@database_sync_to_async
def _job_exists(job_id: int) -> bool:
    from webapp.jobs.models import Job

    return Job.objects.filter(pk=job_id).exists()


class RunConsumer(JobConsumer):
    """`/ws/runs/<id>/`: a run's snapshot, then its events as deltas.

    The consumer joins the group before reading the snapshot, so no event falls between them;
    an event older than the snapshot can be told by its epoch and ignored by the page.
    """

    async def connect(self) -> None:
        run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        if not await self._may_read():
            return
        if not await self._join(run_group(run_id)):
            return
        snapshot = await _run_snapshot(run_id)
        if snapshot is None:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            del self.group
            await self.refuse(CLOSE_NOT_FOUND)
            return
        await self.accept()
        await self._send(snapshot)


@database_sync_to_async
def _run_snapshot(run_id: int) -> dict | None:
    from webapp.errors import NotFound
    from webapp.runs.live import LIVE_FIELDS
    from webapp.runs.selectors import run_snapshot

    try:
        snapshot = run_snapshot(run_id=run_id)
    except NotFound:
        return None
    snapshot["live_fields"] = list(LIVE_FIELDS)
    return snapshot
