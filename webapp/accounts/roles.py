"""Roles and what each may do. Viewers read; editors also edit jobs; operators also run and
reconfigure; admins also manage users. The same rules hold for pages, API and websockets."""

from __future__ import annotations

from django.db import models


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    EDITOR = "editor", "Editor"
    OPERATOR = "operator", "Operator"
    ADMIN = "admin", "Admin"


RANK = {Role.VIEWER: 0, Role.EDITOR: 1, Role.OPERATOR: 2, Role.ADMIN: 3}


class Permission(models.TextChoices):
    READ = "read"
    EDIT_JOBS = "edit_jobs"
    OPERATE_RUNS = "operate_runs"
    MANAGE_USERS = "manage_users"


REQUIRED_ROLE = {
    Permission.READ: Role.VIEWER,
    Permission.EDIT_JOBS: Role.EDITOR,
    Permission.OPERATE_RUNS: Role.OPERATOR,
    Permission.MANAGE_USERS: Role.ADMIN,
}


def role_refusal(permission: Permission) -> str:
    """What a user whose role lacks ``permission`` is told, by pages and API alike."""
    return f"this needs the {REQUIRED_ROLE[permission].value} role or higher"


def role_allows(role: str, permission: Permission) -> bool:
    """Whether a user with `role` holds `permission`."""
    try:
        return RANK[Role(role)] >= RANK[REQUIRED_ROLE[permission]]
    except ValueError:
        return False
