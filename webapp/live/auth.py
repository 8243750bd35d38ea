"""Websocket authentication by `Authorization: Bearer <token>`, on top of the session."""

from __future__ import annotations

from channels.db import database_sync_to_async


class BearerTokenWebsocketMiddleware:
    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        headers = dict(scope.get("headers", []))
        header = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            user = await _user_for_token(token.strip())
            if user is not None:
                scope = dict(scope, user=user)
        return await self.inner(scope, receive, send)


@database_sync_to_async
def _user_for_token(token: str):
    from webapp.accounts.selectors import user_for_token

    return user_for_token(token=token)
