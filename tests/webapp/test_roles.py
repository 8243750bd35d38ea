"""Role rules on every page and endpoint: each role that must be denied is denied, the others
are let through, and anonymous users are sent to sign in (pages) or answered 401 (API)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from webapp.accounts.roles import RANK, REQUIRED_ROLE, Permission, Role

ROLES = list(Role)

# (name, method, path, permission, body); "{job}" is replaced by a real job id.
ENDPOINTS = [
    ("page jobs", "get", "/", Permission.READ, None),
    ("page job", "get", "/jobs/{job}/", Permission.READ, None),
    ("page history", "get", "/history/", Permission.READ, None),
    ("api list jobs", "get", "/api/jobs", Permission.READ, None),
    ("api get job", "get", "/api/jobs/{job}", Permission.READ, None),
    ("api job history", "get", "/api/jobs/{job}/history", Permission.READ, None),
    ("api create job", "post", "/api/jobs", Permission.EDIT_JOBS, "new_dag"),
    ("api new version", "post", "/api/jobs/{job}/versions", Permission.EDIT_JOBS, "version"),
    ("api create user", "post", "/api/users", Permission.MANAGE_USERS, "user"),
    ("api catalog", "get", "/api/catalog", Permission.READ, None),
    ("api validate", "post", "/api/validate", Permission.READ, "new_dag"),
    ("api start run", "post", "/api/jobs/{job}/runs", Permission.OPERATE_RUNS, "empty"),
    ("api get run", "get", "/api/runs/{run}", Permission.READ, None),
    ("api stop run", "post", "/api/runs/{run}/stop", Permission.OPERATE_RUNS, "empty"),
    ("api reconfigure", "post", "/api/runs/{run}/reconfigurations", Permission.OPERATE_RUNS,
     "rescale"),
    ("api preview", "post", "/api/runs/{run}/reconfigurations/preview", Permission.OPERATE_RUNS,
     "rescale"),
    ("api list reconfigurations", "get", "/api/runs/{run}/reconfigurations", Permission.READ,
     None),
    ("api reconfiguration", "get", "/api/reconfigurations/{reconfiguration}", Permission.READ,
     None),
    ("api metrics", "get", "/api/runs/{run}/metrics?since_epoch=0", Permission.READ, None),
    ("api autoscale", "post", "/api/runs/{run}/autoscale", Permission.OPERATE_RUNS, "autoscale"),
    ("api data preview", "post", "/api/runs/{run}/samples", Permission.OPERATE_RUNS, "sample"),
    ("api data preview answer", "get", "/api/samples/{sample}", Permission.OPERATE_RUNS, None),
    ("api sink targets", "get", "/api/sink-targets", Permission.READ, None),
    ("api sink target hand-over", "post", "/api/sink-targets/hand-over", Permission.MANAGE_USERS,
     "hand_over"),
]


def _body(kind, job, simple_dag):
    if kind == "new_dag":
        return dict(simple_dag, name=f"other-{job.pk}")
    if kind == "version":
        return {"dag": simple_dag, "base_version": job.latest_version, "comment": "edit"}
    if kind == "user":
        return {"username": "someone-new", "role": "viewer"}
    if kind == "empty":
        return {}
    if kind == "rescale":
        return {"kind": "rescale", "operator": "counts", "parallelism": 3, "reason": "roles"}
    if kind == "sample":
        return {"operator": "counts"}
    if kind == "autoscale":
        return {"mode": "recommend"}
    if kind == "hand_over":  # a target the job owns, handed to itself
        from webapp.jobs.models import SinkTarget

        SinkTarget.objects.get_or_create(kind="folder", name="roles-out", job=job)
        return {"kind": "folder", "name": "roles-out", "job": job.pk, "reason": "roles"}
    return None


@pytest.fixture
def ids(job, live_run):
    """The ids the endpoint paths name: a job without a run, a live run, a reconfiguration
    and a data preview."""
    from webapp.jobs.models import Reconfiguration
    from webapp.samples.models import OperatorSample

    reconfiguration = Reconfiguration.objects.create(
        run=live_run, request_id="seed", kind="rescale", reason="seed", commands=[])
    sample = OperatorSample.objects.create(run=live_run, operator_id="counts",
                                           request_id="seed-sample")
    return {"job": job.pk, "run": live_run.pk, "reconfiguration": reconfiguration.pk,
            "sample": sample.pk}


def _call(client: Client, method: str, path: str, body):
    if method == "get":
        return client.get(path)
    return client.post(path, data=json.dumps(body), content_type="application/json")


def _allowed(role: Role, permission: Permission) -> bool:
    return RANK[role] >= RANK[REQUIRED_ROLE[permission]]


def _assert_refused(response, status: int, message: str, where: str = "request") -> None:
    """A refusal in the API's error shape, {error, problems}, with its one problem."""
    assert response.status_code == status, response.content
    assert response.json() == {"error": message,
                               "problems": [{"where": where, "message": message}]}


def _role_refusal(permission: Permission) -> str:
    return f"this needs the {REQUIRED_ROLE[permission].value} role or higher"


CASES = [(e, r) for e in ENDPOINTS for r in ROLES]


def _answer(client, endpoint, job, ids, simple_dag):
    """The answer to ``client`` calling ``endpoint`` on the test's job."""
    _, method, path, _, body_kind = endpoint
    return _call(client, method, path.format(**ids), _body(body_kind, job, simple_dag))


@pytest.mark.django_db
@pytest.mark.parametrize(("endpoint", "role"), CASES, ids=[f"{e[0]}-{r.value}" for e, r in CASES])
def test_token_role_rules(endpoint, role, token_client, job, ids, simple_dag):
    name, _, _, permission, _ = endpoint
    response = _answer(token_client(role), endpoint, job, ids, simple_dag)
    if _allowed(role, permission):
        assert response.status_code in (200, 201, 202), (name, role, response.content)
    else:
        _assert_refused(response, 403, _role_refusal(permission))
        assert role.value != "admin"


@pytest.mark.django_db
@pytest.mark.parametrize(("endpoint", "role"), CASES, ids=[f"{e[0]}-{r.value}" for e, r in CASES])
def test_session_role_rules(endpoint, role, session_client, job, ids, simple_dag):
    name, _, _, permission, _ = endpoint
    response = _answer(session_client(role), endpoint, job, ids, simple_dag)
    expected_ok = _allowed(role, permission)
    assert (response.status_code in (200, 201, 202)) == expected_ok, (name, role, response.content)
    if not expected_ok and name.startswith("api"):
        _assert_refused(response, 403, _role_refusal(permission))
    elif not expected_ok:
        assert response.status_code == 403


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=[e[0] for e in ENDPOINTS])
def test_anonymous_is_refused(endpoint, job, ids, simple_dag):
    name, method, path, _, body_kind = endpoint
    response = _call(Client(), method, path.format(**ids), _body(body_kind, job, simple_dag))
    if name.startswith("page"):
        assert response.status_code == 302 and response["Location"].startswith("/login/")
    else:
        _assert_refused(response, 401, "authentication required")
        assert response["WWW-Authenticate"] == "Bearer"


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=[e[0] for e in ENDPOINTS])
@pytest.mark.parametrize(("header", "message"), [
    ("Bearer nope", "the API token is unknown or revoked"),
    ("Token abc", "the Authorization header must be 'Bearer <token>'"),
    ("Bearer ", "the Authorization header must be 'Bearer <token>'"),
])
def test_unknown_and_malformed_tokens_are_refused(endpoint, header, message, job, ids,
                                                  simple_dag):
    name, method, path, _, body_kind = endpoint
    client = Client(HTTP_AUTHORIZATION=header)
    response = _call(client, method, path.format(**ids), _body(body_kind, job, simple_dag))
    _assert_refused(response, 401, message, where="header Authorization")
    assert response["WWW-Authenticate"] == 'Bearer error="invalid_token"'


@pytest.mark.django_db
def test_deactivated_user_token_is_refused(token_client):
    from webapp.accounts.models import User

    client = token_client(Role.ADMIN)
    User.objects.filter(username="admin-token").update(is_active=False)
    _assert_refused(client.get("/api/jobs"), 401, "the API token is unknown or revoked",
                    where="header Authorization")


@pytest.mark.django_db
def test_interface_offers_only_allowed_controls(session_client):
    viewer_page = session_client(Role.VIEWER).get("/").content.decode()
    editor_page = session_client(Role.EDITOR).get("/").content.decode()
    assert "No jobs yet" in viewer_page and "No jobs yet" in editor_page
    assert "POST /api/jobs" in editor_page
    assert "POST /api/jobs" not in viewer_page


@pytest.mark.django_db
def test_session_writes_need_the_csrf_token(make_user, simple_dag):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user(Role.EDITOR, name="csrf-editor"))
    client.get("/")  # sets the csrftoken cookie, as a page visit does
    refused = client.post("/api/jobs", data=json.dumps(simple_dag), content_type="application/json")
    assert refused.status_code == 403 and "X-CSRFToken" in refused.json()["error"]
    _assert_refused(refused, 403, refused.json()["error"])
    accepted = client.post("/api/jobs", data=json.dumps(simple_dag),
                           content_type="application/json",
                           HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)
    assert accepted.status_code == 201


@pytest.mark.django_db
def test_token_writes_need_no_csrf_token(make_user, simple_dag):
    from webapp.accounts.services import api_token_create

    token = api_token_create(user=make_user(Role.EDITOR, name="token-editor"))
    client = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.post("/api/jobs", data=json.dumps(simple_dag),
                           content_type="application/json")
    assert response.status_code == 201
