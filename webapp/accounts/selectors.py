"""Reads on users and tokens."""

from __future__ import annotations

from django.utils import timezone

from webapp.accounts.models import ApiToken, User


def user_for_token(*, token: str) -> User | None:
    """The active user a bearer token belongs to, or None."""
    match = (
        ApiToken.objects.select_related("user")
        .filter(digest=ApiToken.digest_of(token), user__is_active=True)
        .first()
    )
    if match is None:
        return None
    ApiToken.objects.filter(pk=match.pk).update(last_used_at=timezone.now())
    return match.user
