"""Role checks for views: pages redirect anonymous users to the login page, the API answers 401,
and both answer 403 to a signed-in user whose role does not allow the action."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.http import JsonResponse
from django.shortcuts import render

from webapp.accounts.roles import REQUIRED_ROLE, Permission


def page_requires(permission: Permission):
    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not request.user.can(permission):
                context = {"title": "Not allowed", "error": _denied(permission)}
                return render(request, "pages/error.html", context, status=403)
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def api_requires(permission: Permission):
    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return JsonResponse({"error": "authentication required"}, status=401)
            if not request.user.can(permission):
                return JsonResponse({"error": _denied(permission)}, status=403)
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def _denied(permission: Permission) -> str:
    return f"this needs the {REQUIRED_ROLE[permission].value} role or higher"
