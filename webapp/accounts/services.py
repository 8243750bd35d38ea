"""Writes on users and tokens."""

from __future__ import annotations

import secrets

from django.db import transaction

from webapp.accounts.models import ApiToken, User
from webapp.accounts.roles import Role
from webapp.errors import ServiceError


class AccountError(ServiceError):
    """A user or token request is invalid; the message says what is wrong."""


class AccountConflict(AccountError):
    status = 409


def user_create(*, username: str, role: str, password: str | None = None) -> User:
    """Create a user with a role; a user without a password can only use API tokens."""
    if not username or not username.strip():
        raise AccountError("the user name is empty")
    if role not in Role.values:
        raise AccountError(f"unknown role {role!r}: use one of {', '.join(Role.values)}")
    if User.objects.filter(username=username).exists():
        raise AccountConflict(f"a user named {username!r} already exists")
    user = User(username=username, role=role, is_staff=role == Role.ADMIN)
    if password:
        user.set_password(password)
    else:
        user.set_unusable_password()
    user.save()
    return user


def api_token_create(*, user: User) -> str:
    """Create a token for `user` and return it; it cannot be shown again."""
    token = "ss_" + secrets.token_urlsafe(32)
    with transaction.atomic():
        ApiToken.objects.create(user=user, digest=ApiToken.digest_of(token), prefix=token[:8])
    return token
