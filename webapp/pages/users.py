"""The users page: admins add users, change roles, deactivate and revoke tokens."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from webapp.accounts import selectors, services
from webapp.accounts.access import page_requires
from webapp.accounts.roles import Permission, Role
from webapp.errors import NotFound, ServiceError


@page_requires(Permission.MANAGE_USERS)
@require_http_methods(["GET", "POST"])
def users(request):
    context: dict = {"nav": "users", "roles": Role.choices, "form": {}}
    if request.method == "POST":
        form = request.POST
        # Kept as typed when the server refuses, the password included: the person fixes the
        # field named in the error, not every field again.
        context["form"] = {"username": form.get("username", ""), "role": form.get("role", ""),
                           "password": form.get("password", ""),
                           "token": form.get("token") == "on"}
        try:
            user, token = services.user_add(
                actor=request.user,
                username=form.get("username", "").strip(),
                role=form.get("role", ""),
                password=form.get("password") or None,
                token=form.get("token") == "on",
            )
        except ServiceError as error:
            context["add_error"] = str(error)
        else:
            context.update(created=user, token=token, form={})
    context["users"] = selectors.user_list()
    status = 400 if "add_error" in context else 200
    return render(request, "pages/users.html", context, status=status)


@page_requires(Permission.MANAGE_USERS)
@require_POST
def user_update(request, user_id: int):
    try:
        user = selectors.user_get(user_id=user_id)
    except NotFound as error:
        raise Http404(str(error)) from None
    action = request.POST.get("action")
    try:
        if action == "role":
            services.user_role_set(user=user, role=request.POST.get("role", ""), actor=request.user)
        elif action in ("activate", "deactivate"):
            services.user_active_set(user=user, active=action == "activate", actor=request.user)
        elif action == "revoke_tokens":
            services.api_tokens_revoke(user=user, actor=request.user)
        else:
            raise services.AccountError(f"unknown action {action!r}")
    except ServiceError as error:
        context = {"nav": "users", "roles": Role.choices, "form": {}, "error": str(error),
                   "users": selectors.user_list()}
        return render(request, "pages/users.html", context, status=400)
    return redirect("users")
