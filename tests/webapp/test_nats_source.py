"""A job reading NATS JetStream: its URL's password never shown and kept on save, like a
Redis source's; its lag and dead letters shown on the run page."""

from __future__ import annotations

import copy

import pytest

from tests.webapp.test_broker_sources import _broker_epoch, _post, big_orders_dag
from tests.webapp.test_pages import _config
from webapp.accounts.roles import Role
from webapp.jobs.models import JobVersion, Run, RunStatus
from webapp.runs.live import run_epoch_publish

pytestmark = pytest.mark.django_db

SECRET_URL = "nats://app:hunter2-pw@broker.internal:4222"
SHOWN_URL = "nats://app:***@broker.internal:4222"
NATS_DAG = big_orders_dag("source.nats", url=SECRET_URL, start={"orders": 0})


def test_the_password_is_masked_and_kept_and_the_run_page_shows_the_source(token_client,
                                                                            session_client):
    api = token_client(Role.EDITOR)
    created = _post(api, "/api/jobs", NATS_DAG)
    assert created.status_code == 201, created.json()
    job_id = created.json()["id"]
    shown = api.get(f"/api/jobs/{job_id}").json()["versions"][0]["dag"]
    assert shown["operators"][0]["params"]["url"] == SHOWN_URL
    edited = copy.deepcopy(shown)
    edited["operators"][1]["params"]["condition"] = "amount > 20"
    assert _post(api, f"/api/jobs/{job_id}/versions",
                 {"dag": edited, "base_version": 1}).status_code == 201
    version = JobVersion.objects.get(job_id=job_id, number=2)
    assert version.dag["operators"][0]["params"]["url"] == SECRET_URL
    run = Run.objects.create(job_id=job_id, version=version, status=RunStatus.RUNNING,
                             spark_master="local[2]", checkpoint_location="/nonexistent",
                             parallelism={}, target_dag=version.dag)
    run_epoch_publish(run_id=run.pk, metrics=_broker_epoch(0, 900, 2, "501: missing field 'x'"))
    page = session_client(Role.VIEWER).get(f"/runs/{run.pk}/").content.decode()
    assert 'id="broker-sources"' in page and "hunter2" not in page
    assert _config(page)["broker"] == {"events": {"url": SHOWN_URL, "streams": ["orders"],
                                                  "dead_letters": 2,
                                                  "sample": "501: missing field 'x'"}}


def test_a_bad_nats_url_is_refused_naming_the_param(token_client):
    bad = copy.deepcopy(NATS_DAG)
    bad["operators"][0]["params"]["url"] = "redis://broker.internal:6379/0"
    answer = _post(token_client(Role.EDITOR), "/api/jobs", bad)
    assert answer.status_code == 400
    assert "param 'url': must be a URL like nats://host:4222" in answer.content.decode()
