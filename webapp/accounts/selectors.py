"""Reads on users and tokens."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from webapp.accounts.models import ApiToken, User

# A token's last use is recorded to this precision: a read must not write on every request.
LAST_USED_PRECISION = timedelta(minutes=1)


def user_for_token(*, token: str) -> User | None:
    """The active user a bearer token belongs to, or None.

    Every API request asks, so it is one query written once (the ORM would compile its
    join on each request: a fifth of an API read's CPU)."""
    found = list(User.objects.raw(_TOKEN_USER_SQL, [ApiToken.digest_of(token)]))
    if not found:
        return None
    user = found[0]
    now = timezone.now()
    last_used = user.token_last_used_at  # type: ignore[attr-defined]
    if last_used is None or now - last_used >= LAST_USED_PRECISION:
        ApiToken.objects.filter(pk=user.token_id).update(last_used_at=now)  # type: ignore[attr-defined]
    return user


_TOKEN_USER_SQL = (
    'SELECT u.*, t.id AS token_id, t.last_used_at AS token_last_used_at '
    f'FROM "{User._meta.db_table}" u JOIN "{ApiToken._meta.db_table}" t ON t.user_id = u.id '
    "WHERE t.digest = %s AND u.is_active"
)


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
