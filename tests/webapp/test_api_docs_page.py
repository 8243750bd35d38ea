"""The API reference page: served by the API's own URL, its scripts and styles from this
origin's static files only (no inline script, nothing fetched from elsewhere), reading the
generated document, and answering only reads."""

from __future__ import annotations

import json
import re

import pytest

from webapp.accounts.roles import Role

pytestmark = pytest.mark.django_db


def test_the_reference_loads_only_our_own_assets_and_the_document(session_client):
    answer = session_client(Role.VIEWER).get("/api/docs")
    assert answer.status_code == 200
    html = answer.content.decode()
    sources = re.findall(r'<script([^>]*)>', html) + re.findall(r'<link[^>]*href="([^"]+)"', html)
    assert any("vendor/swagger-ui-5.32.0/swagger-ui-bundle.js" in s for s in sources)
    for attributes in re.findall(r"<script([^>]*)>", html):
        assert 'src="/static/' in attributes or 'type="application/json"' in attributes, attributes
    assert not re.search(r'(src|href)="(https?:)?//', html)
    settings = json.loads(re.search(r'id="swagger-settings"[^>]*>(.*?)</script>', html, re.S)[1])
    assert settings["url"] == "/api/schema"
    assert settings["validatorUrl"] is None


def test_the_reference_answers_reads_only(session_client):
    answer = session_client(Role.VIEWER).post("/api/docs")
    assert answer.status_code == 405
    assert "GET" in answer["Allow"]
