"""Sign-in throttling: after repeated failures a name must wait, from the address that failed.

Failures are counted in Redis for a window, per user name and client address together, so every
web process sees the same counts and a restart does not reset them. Counting per address alone
let one address (or every user behind one proxy) lock out every user; counting per name alone
let anyone lock out a user. A name's failures from all addresses have a larger bound, which
caps guessing spread over many addresses.
"""

from __future__ import annotations

import functools
import hashlib

from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView

MAX_FAILURES_PER_NAME_AND_ADDRESS = 5
MAX_FAILURES_PER_NAME = 50
WINDOW_S = 15 * 60
_PREFIX = "streamscale:login-failures:"


@functools.cache
def _redis(url: str):
    import redis

    return redis.Redis.from_url(url)


def _keys(username: str, address: str) -> list[tuple[str, int]]:
    name = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    return [(f"{_PREFIX}name-addr:{name}:{address}", MAX_FAILURES_PER_NAME_AND_ADDRESS),
            (f"{_PREFIX}name:{name}", MAX_FAILURES_PER_NAME)]


def login_wait_s(*, username: str, address: str) -> int:
    """Seconds until this name and address may try again (0: they may now)."""
    client = _redis(settings.REDIS_URL)
    for key, limit in _keys(username, address):
        count = client.get(key)
        if count is not None and int(count) >= limit:
            return max(int(client.ttl(key)), 1)
    return 0


def login_failure_record(*, username: str, address: str) -> None:
    client = _redis(settings.REDIS_URL)
    for key, _ in _keys(username, address):
        if client.incr(key) == 1:  # the window starts at the first failure
            client.expire(key, WINDOW_S)


def login_failures_clear(*, username: str, address: str) -> None:
    _redis(settings.REDIS_URL).delete(*(key for key, _ in _keys(username, address)))


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's sign-in form, refusing to check passwords while the name waits (from this
    address, or from every address after MAX_FAILURES_PER_NAME)."""

    def clean(self):
        username = (self.data.get("username") or "")[:150]
        address = self.request.META.get("REMOTE_ADDR", "") if self.request else ""
        wait = login_wait_s(username=username, address=address)
        if wait:
            raise forms.ValidationError(
                f"Too many failed sign-ins: try again in {(wait + 59) // 60} minute(s).",
                code="throttled")
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            login_failure_record(username=username, address=address)
            raise
        login_failures_clear(username=username, address=address)
        return cleaned


class ThrottledLoginView(LoginView):
    form_class = ThrottledAuthenticationForm
    template_name = "pages/login.html"
