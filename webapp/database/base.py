"""Django's PostgreSQL backend, with health checks of a lasting connection at most once a
second.

Connections last between requests (``CONN_MAX_AGE``; the web server's request threads each keep
one, see ``webapp.bounded``), so Django checks one before a request reuses it
(``CONN_HEALTH_CHECKS``): a ``SELECT 1`` round trip per request, a third of what an API read
asks the database under load. A connection checked less than ``RECHECK_S`` ago is reused
without that check. One that died in between fails the one request that finds it dead, which
Django then closes for the next request to reconnect; a check is no guard against that either,
since a connection can die right after its check passes.
"""

from __future__ import annotations

import time

from django.db.backends.postgresql import base

RECHECK_S = 1.0


class DatabaseWrapper(base.DatabaseWrapper):
    checked_at = float("-inf")

    def close_if_health_check_failed(self) -> None:
        if (
            self.connection is not None
            and not self.health_check_done
            and time.monotonic() - self.checked_at < RECHECK_S
        ):
            self.health_check_done = True
            return
        super().close_if_health_check_failed()
        self.checked_at = time.monotonic()
