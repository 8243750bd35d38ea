"""Reads on users and tokens."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from webapp.accounts.models import ApiToken, User

# A token's last use is recorded to this precision: a read must not write on every request.
LAST_USED_PRECISION = timedelta(minutes=1)


def user_for_token(*, token: str) -> User | None:
    """The active user a bearer token belongs to, or None."""
    found = ApiToken.objects.select_related("user").filter(
        digest=ApiToken.digest_of(token), user__is_active=True)[:1]  # unique: no ordering needed
    match = next(iter(found), None)
    if match is None:
        return None
    now = timezone.now()
    if match.last_used_at is None or now - match.last_used_at >= LAST_USED_PRECISION:
        ApiToken.objects.filter(pk=match.pk).update(last_used_at=now)
    return match.user


def user_list() -> list[User]:
    """Every user, by name, each with ``token_count``."""
    from django.db.models import Count

    return list(User.objects.annotate(token_count=Count("api_tokens")).order_by("username"))


def user_get(*, user_id: int) -> User:
    """The user with this id; raises NotFound."""
    from webapp.errors import NotFound

    user = User.objects.filter(pk=user_id).first()
    if user is None:
        raise NotFound(f"no user {user_id}")
    return user
