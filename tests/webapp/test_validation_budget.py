"""Checking a job document costs a bounded time per request: a document of many new long
expressions is refused at the budget (400) and continues where it stopped when sent again
(expressions already parsed are remembered); a user may have only a few checks running; a
name that is taken is answered before any check."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from django.test import Client

from tests.webapp.conftest import SIMPLE_DAG
from webapp.accounts.roles import Role

pytestmark = pytest.mark.django_db

BUDGET_S = 2.0


def _heavy_document(name: str, filters: int) -> dict:
    """A chain of filters, each with a new 20-term expression (~50 ms each for the parser)."""
    salt = uuid.uuid4().hex[:8]
    ops = [dict(SIMPLE_DAG["operators"][0])]
    for i in range(filters):
        terms = (f"(amount * {k + 1} > {i} OR lower(event_type) = '{salt}_{i}_{k}')"
                 for k in range(20))
        ops.append({"id": f"f{i}", "type": "filter", "params": {"condition": " AND ".join(terms)}})
    ops.append({"id": "out", "type": "sink.memory", "params": {}})
    ids = [op["id"] for op in ops]
    return {"name": name, "operators": ops,
            "edges": [{"from": a, "to": b} for a, b in zip(ids, ids[1:], strict=False)]}


def _timed_post(client: Client, path: str, body: dict):
    started = time.monotonic()
    answer = client.post(path, data=json.dumps(body), content_type="application/json")
    return answer, time.monotonic() - started


def test_a_costly_document_is_refused_at_the_budget_and_continues_when_sent_again(
    token_client,
):
    from webapp.engine_gateway import prepare

    prepare().join()  # the parser's start is not the document's cost
    client = token_client(Role.VIEWER)
    document = _heavy_document("heavy", filters=100)

    answers = []
    for _ in range(8):
        answer, took = _timed_post(client, "/api/validate", document)
        answers.append((answer.status_code, round(took, 1)))
        assert took < BUDGET_S + 2.0, answers  # one expression's parse past the budget at most
        if answer.status_code == 200:
            break
        assert answer.status_code == 400, answer.content
        assert answer.json()["error"] == (
            "validation took over 2 s: send it again to go on (expressions already checked "
            "are remembered), or split the job or simplify its expressions")

    assert answers[0][0] == 400, answers  # 100 new 20-term expressions take ~5 s to parse
    assert answers[-1][0] == 200 and answer.json()["valid"] is True, answers


def test_a_user_may_have_two_checks_running_at_once(make_user, token_client, simple_dag):
    from webapp.accounts.models import User
    from webapp.jobs.validations import MAX_VALIDATIONS_PER_USER, validation_slot

    client = token_client(Role.VIEWER)
    user = User.objects.get(username="viewer-token")
    other = token_client(Role.EDITOR)

    with validation_slot(user_id=user.pk), validation_slot(user_id=user.pk):
        refused, _ = _timed_post(client, "/api/validate", simple_dag)
        others, _ = _timed_post(other, "/api/validate", simple_dag)

    assert MAX_VALIDATIONS_PER_USER == 2
    assert refused.status_code == 429 and refused["Retry-After"] == "5"
    assert refused.json()["error"] == (
        "you have 2 job documents being checked already: wait for one to finish, then send "
        "this one again")
    assert others.status_code == 200  # another user's checks are not counted against them
    again, _ = _timed_post(client, "/api/validate", simple_dag)
    assert again.status_code == 200 and again.json()["valid"] is True


def test_a_taken_name_is_answered_before_the_document_is_checked(token_client, job):
    answer, took = _timed_post(token_client(Role.EDITOR), "/api/jobs",
                               _heavy_document(job.name, filters=100))
    assert answer.status_code == 409, answer.content
    assert answer.json()["error"] == f"a job named {job.name!r} already exists"
    assert took < BUDGET_S  # not checked: checking it would take the whole budget
