"""At most a few document checks per user at once.

Checking a document holds a web thread for up to its time budget (``engine.dag.validate``);
without a bound per user, one user sending checks in parallel takes every thread and other
users' requests wait or are refused. Counted in Redis so every web process sees the same count.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from webapp.errors import ServiceError

MAX_VALIDATIONS_PER_USER = 2
# A count left behind by a process killed mid-check frees itself after this long.
SLOT_TTL_S = 60
_PREFIX = "streamscale:validations:"


class TooManyValidations(ServiceError):
    status = 429


@functools.cache
def _redis(url: str):
    import redis

    return redis.Redis.from_url(url)


@contextmanager
def validation_slot(*, user_id: int | None) -> Iterator[None]:
    """Hold one of the user's check slots for the ``with`` block; TooManyValidations (429)
    when they are all taken. Checks on no user's behalf (the system's) are not counted."""
    if user_id is None:
        yield
        return
    client, key = _redis(settings.REDIS_URL), f"{_PREFIX}{user_id}"
    with client.pipeline() as pipe:
        running, _ = pipe.incr(key).expire(key, SLOT_TTL_S).execute()
    try:
        if running > MAX_VALIDATIONS_PER_USER:
            raise TooManyValidations(
                f"you have {MAX_VALIDATIONS_PER_USER} job documents being checked already: "
                "wait for one to finish, then send this one again")
        yield
    finally:
        client.decr(key)
