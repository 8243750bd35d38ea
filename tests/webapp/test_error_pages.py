"""Refused and missing pages keep the site's navigation and say why; the JSON API keeps its
{error, problems} answers."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client, RequestFactory

from webapp.accounts.roles import Role

pytestmark = pytest.mark.django_db

NAVIGATION = 'aria-label="Main"'


def test_an_unknown_page_is_404_with_the_navigation(session_client):
    response = session_client(Role.VIEWER).get("/no/such/page/")
    page = response.content.decode()
    assert response.status_code == 404 and NAVIGATION in page
    assert "Not found" in page and "There is nothing at /no/such/page/" in page
    assert 'href="/history/"' in page


def test_a_missing_run_says_which(session_client):
    page = session_client(Role.VIEWER).get("/runs/999999/").content.decode()
    assert "There is no run 999999." in page and NAVIGATION in page


def test_the_api_keeps_its_json_answers(session_client, token_client):
    reader = token_client(Role.VIEWER)
    missing = reader.get("/api/jobs/999999")
    assert missing.status_code == 404 and missing.json()["error"] == "there is no job 999999"
    unknown = session_client(Role.VIEWER).get("/api/nothing-here")
    assert unknown.status_code == 404 and "error" in unknown.json()
    refused = reader.post("/api/jobs", data="{}",
                                             content_type="application/json")
    assert refused.status_code == 403 and "editor role" in refused.json()["error"]


def test_a_permission_refusal_renders_the_site_page(make_user):
    from django.views.defaults import permission_denied

    request = RequestFactory().get("/somewhere/")
    request.user = make_user(Role.VIEWER, name="vic")
    response = permission_denied(request, PermissionDenied("this needs the admin role"))
    page = response.content.decode()
    assert response.status_code == 403 and NAVIGATION in page
    assert "Not allowed" in page and "This needs the admin role" in page


def test_a_form_sent_without_its_security_token_is_refused_with_the_navigation(make_user, job):
    make_user(Role.EDITOR, name="eddie")
    client = Client(enforce_csrf_checks=True)
    client.force_login(_user("eddie"))
    response = client.post(f"/jobs/{job.pk}/archive", {"archived": "1"})
    page = response.content.decode()
    assert response.status_code == 403 and NAVIGATION in page
    assert "Not sent" in page and "Nothing was changed" in page
    job.refresh_from_db()
    assert job.archived_at is None


def _user(name: str):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=name)
