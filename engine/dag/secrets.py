"""Broker URLs hold passwords: documents are shown with them masked, and a masked URL
saved back (the editor round trip) gets its password from the version it was edited from.

A URL param may also be ``env:NAME``: the URL is then read from the driver's environment
variable NAME, and the document holds no secret at all.
"""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
URL_PARAMS = {"source.redis_stream": "url", "source.nats": "url"}


def masked_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for pages, API answers and logs)."""
    try:
        parts = urlsplit(url)
        password, port = parts.password, parts.port
    except ValueError:
        return "<a malformed URL>"
    if password is None:
        return url
    user = parts.username or ""
    netloc = f"{user}:{MASK}@{parts.hostname or ''}" + (f":{port}" if port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def masked_document(document: Any) -> Any:
    """A copy of a DAG document with every broker URL's password masked."""
    if not isinstance(document, dict):
        return document
    shown = copy.deepcopy(document)
    for op, param in _url_params(shown):
        op["params"][param] = masked_url(op["params"][param])
    return shown


def unmasked_document(document: Any, previous: Any) -> Any:
    """``document`` with each masked URL replaced by the URL of the same operator in
    ``previous`` when that URL masks to it (anything else is kept as given)."""
    if not isinstance(document, dict) or not isinstance(previous, dict):
        return document
    before = {op.get("id"): op["params"][param] for op, param in _url_params(previous)}
    restored = copy.deepcopy(document)
    for op, param in _url_params(restored):
        old, given = before.get(op.get("id")), op["params"][param]
        if old is not None and MASK in given and masked_url(old) == given:
            op["params"][param] = old
    return restored


def _url_params(document: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    found = []
    for op in document.get("operators") or []:
        if not isinstance(op, dict) or op.get("type") not in URL_PARAMS:
            continue
        param, params = URL_PARAMS[op["type"]], op.get("params")
        if isinstance(params, dict) and isinstance(params.get(param), str):
            found.append((op, param))
    return found
