"""Who may call an operation: a bearer token (checked by ``BearerTokenMiddleware``, which
answers 401 to a bad one) or the session of a signed-in user, whose writes need the CSRF token.
No credentials is 401; a role below the operation's is 403."""

from __future__ import annotations

import json

from django.conf import settings
from django.http import HttpRequest
from ninja.security import APIKeyCookie, HttpBearer
from ninja.utils import check_csrf

from webapp.accounts.roles import Permission, role_refusal
from webapp.api.http import Forbidden
from webapp.errors import ServiceError


class CsrfRefused(ServiceError):
    status = 403


def _permitted(user, permission: Permission):
    if not user.can(permission):
        raise Forbidden(role_refusal(permission))
    return user


class BearerToken(HttpBearer):
    """`Authorization: Bearer <token>`; create one with `manage.py create_user --token`."""

    def __init__(self, permission: Permission) -> None:
        self.permission = permission
        super().__init__()

    def __call__(self, request: HttpRequest):
        if not getattr(request, "auth_via_token", False):
            return None
        return _permitted(request.user, self.permission)

    def authenticate(self, request: HttpRequest, token: str):  # the middleware has done it
        return request.user if getattr(request, "auth_via_token", False) else None


class SessionCookie(APIKeyCookie):
    """The pages' session; writes carry the CSRF token in X-CSRFToken."""

    param_name = settings.SESSION_COOKIE_NAME

    def __init__(self, permission: Permission) -> None:
        self.permission = permission
        super().__init__(csrf=False)  # checked below, answered in the API's error shape

    def __call__(self, request: HttpRequest):
        return self.authenticate(request, None)

    def authenticate(self, request: HttpRequest, key: str | None):
        if not request.user.is_authenticated:
            return None
        refusal = check_csrf(request)
        if refusal is not None:  # settings.CSRF_FAILURE_VIEW's JSON answer
            raise CsrfRefused(_csrf_message(refusal))
        return _permitted(request.user, self.permission)


def _csrf_message(refusal) -> str:
    try:
        return json.loads(refusal.content)["error"]
    except (ValueError, KeyError, TypeError):
        return "CSRF check failed: send the X-CSRFToken header, or use a Bearer token"


def requires(permission: Permission) -> list:
    """The auth of an operation that needs `permission`."""
    return [BearerToken(permission), SessionCookie(permission)]
