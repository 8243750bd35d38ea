"""Writes on users and tokens."""

from __future__ import annotations

import secrets

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from webapp.accounts.models import ApiToken, User
from webapp.accounts.roles import Role
from webapp.errors import ServiceError


class AccountError(ServiceError):
    """A user or token request is invalid; the message says what is wrong."""


class AccountConflict(AccountError):
    status = 409


MAX_USERNAME = 150


def user_create(*, username: str, role: str, password: str | None = None) -> User:
    """Create a user with a role; a user without a password can only use API tokens. The
    password must pass the configured password validators."""
    if not username or not username.strip():
        raise AccountError("the user name is empty")
    if len(username) > MAX_USERNAME or not username.isprintable():
        raise AccountError(f"the user name must be at most {MAX_USERNAME} printable characters")
    if role not in Role.values:
        raise AccountError(f"unknown role {role!r}: use one of {', '.join(Role.values)}")
    if User.objects.filter(username=username).exists():
        raise AccountConflict(f"a user named {username!r} already exists")
    user = User(username=username, role=role, is_staff=role == Role.ADMIN)
    if password:
        _check_password(password, user)
        user.set_password(password)
    else:
        user.set_unusable_password()
    user.save()
    return user


def _check_password(password: str, user: User) -> None:
    try:
        validate_password(password, user)
    except ValidationError as error:
        messages = list(error.messages)
        raise AccountError(
            "the password is too weak: " + " ".join(messages),
            problems=[{"where": "field password", "message": m} for m in messages],
        ) from None


def api_token_create(*, user: User) -> str:
    """Create a token for `user` and return it; it cannot be shown again."""
    token = "ss_" + secrets.token_urlsafe(32)
    with transaction.atomic():
        ApiToken.objects.create(user=user, digest=ApiToken.digest_of(token), prefix=token[:8])
    return token


def user_role_set(*, user: User, role: str, actor: User) -> User:
    """Give `user` another role. An admin cannot lower their own role (someone must keep it)."""
    if role not in Role.values:
        raise AccountError(f"unknown role {role!r}: use one of {', '.join(Role.values)}")
    if user.pk == actor.pk and role != Role.ADMIN:
        raise AccountError("you cannot take the admin role from yourself")
    with transaction.atomic():
        before = user.role
        user.role, user.is_staff = role, role == Role.ADMIN
        user.save(update_fields=["role", "is_staff"])
        _audit_user(actor, "user.role_changed", user, {"from": before, "to": role})
    return user


def user_active_set(*, user: User, active: bool, actor: User) -> User:
    """Let a user sign in and use their tokens again, or stop them (nothing is deleted)."""
    if user.pk == actor.pk and not active:
        raise AccountError("you cannot deactivate yourself")
    with transaction.atomic():
        user.is_active = active
        user.save(update_fields=["is_active"])
        _audit_user(actor, "user.activated" if active else "user.deactivated", user, {})
    return user


def api_tokens_revoke(*, user: User, actor: User) -> int:
    """Revoke every API token of `user`; answers how many there were."""
    with transaction.atomic():
        revoked, _ = ApiToken.objects.filter(user=user).delete()
        _audit_user(actor, "user.tokens_revoked", user, {"tokens": revoked})
    return revoked


def _audit_user(actor: User, action: str, user: User, details: dict) -> None:
    from webapp.audit.services import audit_record
    from webapp.jobs.models import Trigger

    audit_record(
        actor=actor, trigger=Trigger.USER, action=action,
        details={"user": user.username, **details},
    )


def user_add(
    *, actor: User, username: str, role: str, password: str | None, token: bool
) -> tuple[User, str | None]:
    """Create a user for an admin, audited; answers the user and, if asked, its first token."""
    with transaction.atomic():
        user = user_create(username=username, role=role, password=password)
        secret = api_token_create(user=user) if token else None
        _audit_user(actor, "user.created", user, {"role": role, "token": bool(secret)})
    return user, secret
