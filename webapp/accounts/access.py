"""Role checks for pages: anonymous users are sent to the login page, and a signed-in user whose
role does not allow the action is answered 403 (the API's own checks: webapp.api.auth)."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.shortcuts import render

from webapp.accounts.roles import Permission, role_refusal


def page_requires(permission: Permission):
    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not request.user.can(permission):
                context = {"title": "Not allowed", "error": role_refusal(permission)}
                return render(request, "pages/error.html", context, status=403)
            return view(request, *args, **kwargs)

        return wrapper

    return decorate
