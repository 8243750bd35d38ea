"""Management commands: create_user prints a working token; ensure_demo is idempotent."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from webapp.accounts.models import User
from webapp.jobs.models import Job, Run

pytestmark = pytest.mark.django_db


def test_create_user_prints_a_token_that_authenticates():
    out = StringIO()
    call_command("create_user", "ops", "--role", "operator", "--token", stdout=out)
    token = out.getvalue().strip()
    assert token.startswith("ss_")
    assert User.objects.get(username="ops").role == "operator"
    assert Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/jobs").status_code == 200


def test_create_user_refuses_a_duplicate_name():
    call_command("create_user", "dup", "--role", "viewer", stdout=StringIO())
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_user", "dup", "--role", "viewer", stdout=StringIO())


def _signs_in(name: str, password: str) -> bool:
    response = Client().post("/login/", {"username": name, "password": password})
    return response.status_code == 302


def test_create_user_takes_the_password_from_the_environment(monkeypatch):
    monkeypatch.setenv("STREAMSCALE_USER_PASSWORD", "from-the-env-42")
    out = StringIO()
    call_command("create_user", "envy", "--role", "viewer", "--token", stdout=out)
    assert out.getvalue().strip().startswith("ss_")  # --token still prints a token
    assert _signs_in("envy", "from-the-env-42")


def test_create_user_takes_the_password_from_a_prompt_typed_twice(monkeypatch):
    import getpass

    typed = iter(["typed-at-prompt-7", "typed-at-prompt-7", "first-one-9", "second-one-9"])
    monkeypatch.setattr(getpass, "getpass", lambda prompt: next(typed))
    call_command("create_user", "prompted", "--role", "editor", "--password-prompt",
                 stdout=StringIO())
    assert _signs_in("prompted", "typed-at-prompt-7")
    with pytest.raises(CommandError, match="the two passwords typed differ"):
        call_command("create_user", "typo", "--role", "editor", "--password-prompt",
                     stdout=StringIO())
    assert not User.objects.filter(username="typo").exists()


def test_create_user_refuses_a_password_on_the_command_line():
    with pytest.raises(CommandError, match="--password would put the password on the command "
                                           "line: use --password-prompt or set "
                                           "STREAMSCALE_USER_PASSWORD"):
        call_command("create_user", "visible", "--role", "viewer", "--password", "seen-by-ps-1",
                     stdout=StringIO())
    assert not User.objects.filter(username="visible").exists()


def test_create_user_without_a_password_makes_a_token_only_user(monkeypatch):
    monkeypatch.delenv("STREAMSCALE_USER_PASSWORD", raising=False)
    call_command("create_user", "tokens-only", "--role", "viewer", stdout=StringIO())
    assert not User.objects.get(username="tokens-only").has_usable_password()


def test_ensure_demo_creates_once_and_says_how_to_sign_in():
    first, second = StringIO(), StringIO()
    call_command("ensure_demo", stdout=first)
    call_command("ensure_demo", stdout=second)
    assert "sign in as 'admin'" in first.getvalue() and "(created" in first.getvalue()
    assert "(created" not in second.getvalue()
    password = first.getvalue().split("with password '", 1)[1].split("'", 1)[0]
    assert len(password) >= 16 and password != "streamscale"
    assert password not in second.getvalue()
    assert User.objects.get(username="admin").check_password(password)
    assert User.objects.filter(username="admin", role="admin").count() == 1
    assert Job.objects.filter(name="campaign-views").count() == 1
    assert "demo run" in first.getvalue() and "demo run" not in second.getvalue()
    assert Run.objects.filter(job__name="campaign-views").count() == 1


def test_ensure_demo_with_the_demo_off_creates_the_admin_only(settings):
    settings.DEMO = False
    out = StringIO()
    call_command("ensure_demo", stdout=out)
    assert User.objects.filter(username="admin", role="admin").count() == 1
    assert not Job.objects.exists() and not Run.objects.exists()
    assert "demo job" not in out.getvalue() and "demo run" not in out.getvalue()
