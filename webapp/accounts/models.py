from __future__ import annotations

import hashlib

from django.contrib.auth.models import AbstractUser
from django.db import models

from webapp.accounts.roles import Permission, Role, role_allows


class User(AbstractUser):
    """A person or automation account; what it may do follows from its role."""

    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)

    def can(self, permission: Permission) -> bool:
        return self.is_active and role_allows(self.role, permission)


class ApiToken(models.Model):
    """A bearer token for the API. Only its SHA-256 digest is stored."""

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    digest = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=8)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    @staticmethod
    def digest_of(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"
