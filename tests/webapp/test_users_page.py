"""The users page: only admins see it; they add users (with a token shown once), change roles,
deactivate and revoke tokens, each change audited; an admin cannot lock themself out."""

from __future__ import annotations

import pytest

from webapp.accounts.models import ApiToken, User
from webapp.accounts.roles import Role
from webapp.audit.models import AuditEntry

pytestmark = pytest.mark.django_db


def test_only_admins_get_the_page_and_the_link(session_client):
    operator = session_client(Role.OPERATOR)
    assert operator.get("/users/").status_code == 403
    assert 'href="/users/"' not in operator.get("/").content.decode()
    admin = session_client(Role.ADMIN)
    assert admin.get("/users/").status_code == 200
    assert 'href="/users/"' in admin.get("/").content.decode()


def test_an_admin_adds_a_user_with_a_token_shown_once(session_client):
    admin = session_client(Role.ADMIN)
    page = admin.post(
        "/users/", {"username": "carol", "role": "operator", "password": "", "token": "on"}
    ).content.decode()
    carol = User.objects.get(username="carol")
    assert carol.role == Role.OPERATOR and not carol.has_usable_password()
    token = page.split('<code class="token">')[1].split("</code>")[0]
    assert ApiToken.objects.get(user=carol).digest == ApiToken.digest_of(token)
    assert token not in admin.get("/users/").content.decode()
    entry = AuditEntry.objects.get(action="user.created")
    assert entry.details == {"user": "carol", "role": "operator", "token": True}


def test_a_bad_new_user_is_refused_with_its_reason(session_client, make_user):
    admin = session_client(Role.ADMIN)
    make_user(Role.VIEWER, name="dup")
    response = admin.post("/users/", {"username": "dup", "role": "viewer"})
    assert response.status_code == 400 and "already exists" in response.content.decode()
    response = admin.post("/users/", {"username": "eve", "role": "root"})
    assert response.status_code == 400 and "unknown role" in response.content.decode()
    assert not User.objects.filter(username="eve").exists()


def test_role_deactivation_and_token_revocation_are_applied_and_audited(
    session_client, make_user, token_client
):
    admin = session_client(Role.ADMIN)
    viewer = make_user(Role.VIEWER, name="vic")
    from webapp.accounts.services import api_token_create

    token = api_token_create(user=viewer)
    promoted = admin.post(f"/users/{viewer.pk}/", {"action": "role", "role": "editor"})
    assert promoted.status_code == 302
    viewer.refresh_from_db()
    assert viewer.role == Role.EDITOR
    assert admin.post(f"/users/{viewer.pk}/", {"action": "revoke_tokens"}).status_code == 302
    from django.test import Client

    api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert api.get("/api/jobs").status_code == 401
    assert admin.post(f"/users/{viewer.pk}/", {"action": "deactivate"}).status_code == 302
    viewer.refresh_from_db()
    assert not viewer.is_active
    actions = list(AuditEntry.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["user.role_changed", "user.tokens_revoked", "user.deactivated"]


def test_an_admin_cannot_demote_or_deactivate_themself(session_client):
    admin = session_client(Role.ADMIN)
    me = User.objects.get(username="admin-session")
    response = admin.post(f"/users/{me.pk}/", {"action": "role", "role": "viewer"})
    assert response.status_code == 400 and "from yourself" in response.content.decode()
    response = admin.post(f"/users/{me.pk}/", {"action": "deactivate"})
    assert response.status_code == 400 and "deactivate yourself" in response.content.decode()
    me.refresh_from_db()
    assert me.role == Role.ADMIN and me.is_active
