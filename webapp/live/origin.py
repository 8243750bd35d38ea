"""Websocket Origin check: the page that opens a socket must come from the product's own origin.

Channels' ``AllowedHostsOriginValidator`` compares only the Origin's host with ALLOWED_HOSTS, so a
page on another port of the same host (same site: the session cookie is sent) could open a socket.
Like Django's CSRF check for plain HTTP, the Origin's scheme, host and port must equal those the
socket was opened on (its Host header, http for ws and https for wss), or one of
CSRF_TRUSTED_ORIGINS.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from webapp.live.refusals import CLOSE_FORBIDDEN, refuse


class SameOriginWebsocketValidator:
    """ASGI middleware: a websocket whose Origin is not the product's own is refused (4403)."""

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await refuse(receive, send, code=CLOSE_FORBIDDEN)
        return await self.inner(scope, receive, send)


def origin_allowed(scope: dict) -> bool:
    """Whether the socket's Origin is the origin it was opened on, or a trusted one."""
    headers = dict(scope.get("headers", []))
    origin = headers.get(b"origin", b"").decode("latin-1").strip().lower()
    host = headers.get(b"host", b"").decode("latin-1").strip().lower()
    if not origin or not host:
        return False
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    if origin in {o.lower() for o in getattr(settings, "CSRF_TRUSTED_ORIGINS", [])}:
        return True
    parts = urlsplit(origin)
    return (parts.scheme, parts.netloc) == (_page_scheme(scope, headers), host)


def _page_scheme(scope: dict, headers: dict[bytes, bytes]) -> str:
    """The scheme of a page allowed to open this socket: https for wss, or behind a
    TLS-terminating proxy whose header Django trusts (SECURE_PROXY_SSL_HEADER)."""
    if scope.get("scheme") == "wss":
        return "https"
    proxy_header = settings.SECURE_PROXY_SSL_HEADER
    if proxy_header:
        name, value = proxy_header
        header = name.removeprefix("HTTP_").replace("_", "-").lower().encode("latin-1")
        if headers.get(header, b"").decode("latin-1").split(",")[0].strip() == value:
            return "https"
    return "http"
