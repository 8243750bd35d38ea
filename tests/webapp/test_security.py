"""What the API and pages refuse: unsafe jobs, unbounded input, wrong methods, weak passwords,
password guessing, formulas in exported CSV; and the safe defaults of the configuration."""

from __future__ import annotations

import copy
import json
import stat

import pytest
import redis
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from webapp.accounts.roles import Role
from webapp.accounts.throttle import MAX_FAILURES_PER_NAME, MAX_FAILURES_PER_NAME_AND_ADDRESS
from webapp.config import ConfigError, load_config
from webapp.jobs.models import Job, JobVersion
from webapp.pages.history import csv_safe

pytestmark = pytest.mark.django_db


def post(client: Client, path: str, body, **extra):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return client.post(path, data=data, content_type="application/json", **extra)


@pytest.fixture
def editor(token_client) -> Client:
    return token_client(Role.EDITOR)


def test_a_job_reaching_the_host_is_refused_at_save_with_the_function_named(editor, simple_dag):
    simple_dag["operators"][1] = {"id": "clicks", "type": "map", "params": {"columns": {
        "leak": "java_method('java.lang.System', 'getenv', 'DATABASE_URL')"}}}
    answer = post(editor, "/api/jobs", simple_dag)
    assert answer.status_code == 400
    problems = answer.json()["problems"]
    assert problems[0]["where"] == "operator 'clicks'"
    assert "function 'java_method' is not allowed" in problems[0]["message"]
    assert not Job.objects.exists()


def test_a_statement_after_the_expression_is_refused_at_save(editor, simple_dag):
    simple_dag["operators"][1]["params"]["condition"] = "event_type = 'view'; DROP TABLE x"
    answer = post(editor, "/api/jobs", simple_dag)
    assert answer.status_code == 400 and "syntax error at or near ';'" in answer.content.decode()


def test_live_validation_names_unknown_columns(editor, simple_dag):
    simple_dag["operators"][1]["params"]["condition"] = "evnt_type = 'click'"
    answer = post(editor, "/api/validate", simple_dag).json()
    assert answer["valid"] is False
    assert "unknown column 'evnt_type'" in answer["problems"][0]["message"]


def test_a_stored_version_that_fails_the_checks_never_starts(token_client, make_user, simple_dag):
    version = post(token_client(Role.EDITOR), "/api/jobs", simple_dag).json()
    stored = JobVersion.objects.get(job_id=version["id"], number=1)
    dag = copy.deepcopy(stored.dag)
    dag["operators"][1]["params"]["condition"] = "rand() > 0.5"
    # A version saved under older rules, as a database restored from before them holds.
    JobVersion.objects.create(job_id=version["id"], number=2, dag=dag)
    answer = post(token_client(Role.OPERATOR), f"/api/jobs/{version['id']}/runs",
                  {"version": 2})
    assert answer.status_code == 409
    assert "function 'rand' is not allowed" in answer.json()["error"]


@pytest.mark.parametrize(("body", "status", "message"), [
    (b"[" * 5000 + b"]" * 5000, 400, "nested 5000 deep"),
    (b'{"name": NaN}', 400, "NaN is not a JSON number"),
    (b'{"name": Infinity}', 400, "Infinity is not a JSON number"),
    (b'{"name": "a\\u0000b"}', 400, "NUL character"),
    (b'{"name": ' + b"9" * 5000 + b"}", 400, "a whole number of 5000 digits: at most 100"),
    (b'{"name": -' + b"9" * 101 + b"}", 400, "a whole number of 101 digits: at most 100"),
    (b'{"name": "' + b"x" * 1_100_000 + b'"}', 413, "at most 1000000 are allowed"),
])
def test_bodies_are_bounded_and_answered_in_json(editor, body, status, message):
    answer = post(editor, "/api/jobs", body)
    assert answer.status_code == status
    assert message in answer.json()["error"]
    assert "set_int_max_str_digits" not in answer.content.decode()


def test_overlong_fields_are_refused(token_client):
    admin = token_client(Role.ADMIN)
    answer = post(admin, "/api/users", {"username": "u" * 151, "role": "viewer"})
    assert answer.status_code == 400 and "at most 150" in answer.json()["error"]


@pytest.mark.parametrize("path", ["/api/jobs/1/history", "/api/catalog", "/api/schema",
                                  "/api/runs/1", "/api/runs/1/metrics",
                                  "/api/reconfigurations/1", "/api/jobs/1"])
@pytest.mark.parametrize("method", ["TRACE", "DELETE", "PUT"])
def test_read_only_endpoints_refuse_other_methods(editor, path, method):
    answer = editor.generic(method, path)
    assert answer.status_code == 405
    assert "GET" in answer["Allow"] and answer.json()["error"]


@pytest.mark.parametrize("path", ["/api/nothing", "/api/jobs/1/nothing", "/api/",
                                  "/api/jobs/99999999999999999999999",
                                  "/api/runs/123456789012345678"])
def test_every_api_404_is_json(editor, path):
    answer = editor.get(path)
    assert answer.status_code == 404
    assert answer["Content-Type"] == "application/json" and answer.json()["error"]


def test_metrics_since_epoch_is_bounded(token_client, live_run):
    answer = token_client(Role.VIEWER).get(
        f"/api/runs/{live_run.pk}/metrics?since_epoch=99999999999999999999999")
    assert answer.status_code == 400 and "since_epoch" in answer.json()["error"]


@pytest.mark.django_db(transaction=True)
def test_a_reused_request_id_with_another_body_is_a_conflict(token_client, live_run):
    operator = token_client(Role.OPERATOR)
    path = f"/api/runs/{live_run.pk}/reconfigurations"
    first = {"kind": "rescale", "operator": "counts", "parallelism": 3, "reason": "more",
             "request_id": "same-id"}
    assert post(operator, path, first).status_code == 202
    assert post(operator, path, first).json()["created"] is False
    other = post(operator, path, dict(first, parallelism=4))
    assert other.status_code == 409 and "already used" in other.json()["error"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("change", "field"), [
    ({"kind": "scale_in", "instances": 10**6}, "instances"),
    ({"reason": "x" * 1_000_00}, "reason"),
    ({"request_id": "a\tb"}, "request_id"),
])
def test_reconfiguration_fields_are_bounded(token_client, live_run, change, field):
    body = dict({"kind": "rescale", "operator": "counts", "parallelism": 3, "reason": "r"},
                **change)
    answer = post(token_client(Role.OPERATOR), f"/api/runs/{live_run.pk}/reconfigurations",
                  body)
    assert answer.status_code == 400 and field in answer.json()["error"]


@pytest.mark.django_db(transaction=True)
def test_autoscale_cooldown_is_bounded(token_client, live_run):
    answer = post(token_client(Role.OPERATOR), f"/api/runs/{live_run.pk}/autoscale",
                  {"mode": "auto", "cooldown_s": 10**20})
    assert answer.status_code == 400 and "cooldown_s" in answer.json()["error"]


def test_weak_passwords_are_refused_on_every_path(token_client, monkeypatch):
    answer = post(token_client(Role.ADMIN), "/api/users",
                  {"username": "weak", "role": "viewer", "password": "a"})
    assert answer.status_code == 400 and "too short" in answer.json()["error"]
    with pytest.raises(CommandError, match="too common|too short"):
        monkeypatch.setenv("STREAMSCALE_USER_PASSWORD", "password")
        call_command("create_user", "weak2", "--role", "viewer")


@pytest.fixture
def clear_login_failures():
    yield
    client = redis.Redis.from_url(settings.REDIS_URL)
    keys = list(client.scan_iter("streamscale:login-failures:*"))
    if keys:
        client.delete(*keys)


def test_sign_in_is_throttled_after_repeated_failures(make_user, clear_login_failures):
    make_user(Role.VIEWER, name="guessed", password="right-password-1")
    client = Client()
    for _ in range(MAX_FAILURES_PER_NAME_AND_ADDRESS):
        wrong = client.post("/login/", {"username": "guessed", "password": "wrong-password"})
        assert "do not match" in wrong.content.decode()
    right = client.post("/login/", {"username": "guessed", "password": "right-password-1"})
    assert right.status_code == 200 and "Too many failed sign-ins" in right.content.decode()
    assert "_auth_user_id" not in client.session


def _sign_in(name: str, password: str, address: str):
    return Client(REMOTE_ADDR=address).post("/login/", {"username": name, "password": password})


def test_one_address_cannot_lock_out_other_users(make_user, clear_login_failures):
    make_user(Role.VIEWER, name="bystander", password="right-password-2")
    for i in range(40):  # more than the old per-address bound (30), over many names
        _sign_in(f"guess-{i % 8}", "wrong-password", "10.0.0.66")
    right = _sign_in("bystander", "right-password-2", "10.0.0.66")
    assert right.status_code == 302, right.content.decode()


def test_failures_from_one_address_do_not_throttle_the_name_elsewhere(
    make_user, clear_login_failures
):
    make_user(Role.VIEWER, name="target", password="right-password-3")
    for _ in range(MAX_FAILURES_PER_NAME_AND_ADDRESS):
        _sign_in("target", "wrong-password", "10.0.0.66")
    throttled = _sign_in("target", "right-password-3", "10.0.0.66")
    assert "Too many failed sign-ins" in throttled.content.decode()
    assert _sign_in("target", "right-password-3", "10.0.0.7").status_code == 302


def test_a_name_guessed_from_many_addresses_is_throttled_everywhere(
    make_user, clear_login_failures
):
    make_user(Role.VIEWER, name="sprayed", password="right-password-4")
    for i in range(MAX_FAILURES_PER_NAME):
        _sign_in("sprayed", "wrong-password", f"10.1.{i // 200}.{i % 200}")
    throttled = _sign_in("sprayed", "right-password-4", "10.9.9.9")
    assert "Too many failed sign-ins" in throttled.content.decode()


def test_pages_carry_a_content_security_policy(session_client):
    page = session_client(Role.VIEWER).get("/history/")
    policy = page["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "<script>" not in page.content.decode()  # no inline script for the policy to block


def test_csv_cells_that_would_be_formulas_are_neutralised():
    assert [csv_safe(c) for c in ["=1+1", "+A1", "-2", "@SUM(A1)", "\tx", "\rx", "ok", 3]] == [
        "'=1+1", "'+A1", "'-2", "'@SUM(A1)", "'\tx", "'\rx", "ok", 3]


def test_history_export_neutralises_a_reason_written_as_a_formula(session_client, live_run):
    from webapp.audit.services import audit_record

    audit_record(actor=None, trigger="user", action="run.stopped", subject=live_run,
                 outcome="done", reason='=HYPERLINK("http://x","y")')
    text = session_client(Role.VIEWER).get("/history.csv").content.decode()
    assert "'=HYPERLINK" in text and ',=HYPERLINK' not in text


def test_the_secret_key_is_random_and_kept_private(tmp_path):
    first = load_config({"STREAMSCALE_VAR_DIR": str(tmp_path)}).secret_key
    again = load_config({"STREAMSCALE_VAR_DIR": str(tmp_path)}).secret_key
    other = load_config({"STREAMSCALE_VAR_DIR": str(tmp_path / "other")}).secret_key
    assert first == again and first != other and len(first) >= 50
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600
    assert str(tmp_path) not in first


def test_cookies_are_secure_off_loopback_and_data_stays_out_of_static(tmp_path):
    env = {"STREAMSCALE_VAR_DIR": str(tmp_path)}
    assert load_config(env).secure_cookies is False
    assert load_config(dict(env, ALLOWED_HOSTS="streams.example.com")).secure_cookies is True
    assert load_config(env).data_dir == tmp_path / "data"
    with pytest.raises(ConfigError, match="static"):
        load_config(dict(env, STREAMSCALE_DATA_DIR=str(tmp_path / "static" / "leak")))
    with pytest.raises(ConfigError, match="STREAMSCALE_SINK_SCHEMA"):
        load_config(dict(env, STREAMSCALE_SINK_SCHEMA="public"))
