"""Generated passwords of the embedded servers, kept in ``var/`` readable by their owner only.

Each server gets a random password on first start (``var/postgres/password``,
``var/redis/password``), so another local user cannot read or write the product's data; the
URLs the servers are reached by carry it, and anything printed shows it masked.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path


def stored_password(path: Path) -> str:
    """The password kept in ``path``, made (mode 0600) on first use."""
    return stored_secret(path, lambda: secrets.token_hex(24))  # hex: no escaping in URLs


def stored_secret(path: Path, make: Callable[[], str]) -> str:
    """The secret kept in ``path``; on first use ``make()`` writes it, readable by its owner
    only. Safe when several processes ask at once: one of them makes it."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # made meanwhile by another process
        return path.read_text().strip()
    with os.fdopen(fd, "w") as out:
        out.write(make())
    return path.read_text().strip()


def redacted(url: str) -> str:
    """``url`` with its password replaced by ``***``, for logs and the console."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)
