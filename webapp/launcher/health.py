"""Whether a started web server serves: its ``/healthz`` answers 200."""

from __future__ import annotations

import urllib.error
import urllib.request


def answers_health(url: str) -> bool:
    """``url`` (ending in ``/``) + ``healthz`` answers 200 within 2 s."""
    try:
        with urllib.request.urlopen(url + "healthz", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False
