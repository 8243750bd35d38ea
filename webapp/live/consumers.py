"""Websocket transport only: authenticate, join the job's group, forward its events."""

from __future__ import annotations

import json

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from webapp.accounts.roles import Permission
from webapp.dependencies import REDIS_DOWN
from webapp.live.events import job_group, run_group

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_TRY_AGAIN = 1013  # RFC 6455 "try again later": the channel layer (Redis) is down


class JobConsumer(AsyncWebsocketConsumer):
    """`/ws/jobs/<id>/`: live events of one job for users allowed to read it."""

    async def connect(self) -> None:
        self.job_id = int(self.scope["url_route"]["kwargs"]["job_id"])
        if not await self._may_read():
            return
        if not await _job_exists(self.job_id):
            await self.close(code=CLOSE_NOT_FOUND)
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
        """Whether the user may read; else the handshake is refused (4401 or 4403)."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return False
        if not user.can(Permission.READ):
            await self.close(code=CLOSE_FORBIDDEN)
            return False
        return True

    async def _join(self, group: str) -> bool:
        """Join ``group``; with Redis down, refuse the handshake cleanly (1013) instead."""
        try:
            await self.channel_layer.group_add(group, self.channel_name)
        except REDIS_DOWN:
            await self.close(code=CLOSE_TRY_AGAIN)
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
            await self.close(code=CLOSE_NOT_FOUND)
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
