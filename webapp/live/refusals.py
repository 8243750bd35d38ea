"""The close codes a refused or ended websocket carries, and refusal at the ASGI level.

A socket closed before its handshake is accepted reaches the client as a bare HTTP 403 (the
server answers the upgrade request), so a client could not tell "sign in" from "try again
later". Every refusal therefore accepts, then closes with its code at once (no data is sent).
"""

from __future__ import annotations

CLOSE_UNAUTHENTICATED = 4401  # not signed in: retrying will not help
CLOSE_FORBIDDEN = 4403  # signed in but not allowed, or a page from another origin
CLOSE_NOT_FOUND = 4404  # no such job or run
CLOSE_TRY_AGAIN = 1013  # RFC 6455 "try again later": the channel layer (Redis) is down


async def refuse(receive, send, *, code: int) -> None:
    """Answer a websocket's handshake, then close it with ``code``; no inner app is called."""
    message = await receive()
    if message["type"] != "websocket.connect":
        return  # the client left before its handshake
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.close", "code": code})
