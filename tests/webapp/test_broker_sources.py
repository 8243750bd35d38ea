"""A job reading a broker: its URL's password never shown by the API or the pages, kept on
save; its lag and dead letters stored per epoch and shown on the run page."""

from __future__ import annotations

import copy
import json

import pytest

from tests.webapp.conftest import chain_dag
from tests.webapp.test_pages import _config
from webapp.accounts.roles import Role
from webapp.jobs.models import JobVersion, Run, RunStatus
from webapp.runs.live import run_epoch_publish
from webapp.runs.selectors import run_metrics

pytestmark = pytest.mark.django_db

SECRET_URL = "redis://:hunter2-pw@broker.internal:6379/0"
SHOWN_URL = "redis://:***@broker.internal:6379/0"


def big_orders_dag(source_type: str, *, url: str, start: object) -> dict:
    """A job reading the stream "orders" of a ``source_type`` source at ``url`` from
    ``start`` and keeping the orders above 10."""
    return chain_dag(
        "orders",
        {"id": "events", "type": source_type,
         "params": {"url": url, "streams": ["orders"], "start": start,
                    "schema": {"order_id": "long", "amount": "double"}}},
        {"id": "big", "type": "filter", "params": {"condition": "amount > 10"}},
        {"id": "out", "type": "sink.memory"},
    )


STREAM_DAG = big_orders_dag("source.redis_stream", url=SECRET_URL, start="earliest")


def _post(client, path, body):
    return client.post(path, data=json.dumps(body), content_type="application/json")


def test_the_password_is_masked_everywhere_it_is_shown_and_kept_on_save(token_client,
                                                                          session_client):
    api = token_client(Role.EDITOR)
    job_id = _post(api, "/api/jobs", STREAM_DAG).json()["id"]
    shown = api.get(f"/api/jobs/{job_id}").json()["versions"][0]["dag"]
    assert shown["operators"][0]["params"]["url"] == SHOWN_URL
    pages = session_client(Role.EDITOR)
    for path in (f"/jobs/{job_id}/", f"/jobs/{job_id}/edit/", f"/jobs/{job_id}/diff/?b=1"):
        page = pages.get(path).content.decode()
        assert "hunter2" not in page, path
    edited = copy.deepcopy(shown)  # the editor's round trip: the masked URL comes back
    edited["operators"][1]["params"]["condition"] = "amount > 20"
    assert _post(api, f"/api/jobs/{job_id}/versions",
                 {"dag": edited, "base_version": 1}).status_code == 201
    stored = JobVersion.objects.get(job_id=job_id, number=2).dag
    assert stored["operators"][0]["params"]["url"] == SECRET_URL


def test_a_new_url_with_a_new_password_replaces_the_old_one(token_client):
    api = token_client(Role.EDITOR)
    job_id = _post(api, "/api/jobs", STREAM_DAG).json()["id"]
    edited = copy.deepcopy(STREAM_DAG)
    edited["operators"][0]["params"]["url"] = "redis://:other-pw@broker.internal:6379/0"
    assert _post(api, f"/api/jobs/{job_id}/versions",
                 {"dag": edited, "base_version": 1}).status_code == 201
    stored = JobVersion.objects.get(job_id=job_id, number=2).dag
    assert stored["operators"][0]["params"]["url"].startswith("redis://:other-pw@")


def _broker_epoch(epoch: int, lag: int, dead: int, sample: str | None) -> dict:
    return {
        "epoch": epoch, "batch_duration_ms": 500.0, "backlog_rows": lag,
        "latency_ms": {"p50": 10.0, "p99": 20.0, "max": 30.0},
        "operators": {"events": {"instances": 1, "rows_in": None, "rows_out": 100,
                                 "busy_ms": [1.0], "input_rate": None, "processing_rate": 1.0,
                                 "output_rate": 100.0, "congested": False, "etp": 1.0}},
        "broker_sources": {"events": {"lag": {"orders": lag}, "backlog": lag,
                                      "dead_letters": dead, "dead_letter_sample": sample}},
    }


def test_lag_and_dead_letters_are_stored_and_shown_on_the_run_page(token_client,
                                                                  session_client):
    api = token_client(Role.EDITOR)
    job_id = _post(api, "/api/jobs", STREAM_DAG).json()["id"]
    version = JobVersion.objects.get(job_id=job_id, number=1)
    run = Run.objects.create(job_id=job_id, version=version, status=RunStatus.RUNNING,
                             spark_master="local[2]", checkpoint_location="/nonexistent",
                             parallelism={}, target_dag=version.dag)
    run_epoch_publish(run_id=run.pk, metrics=_broker_epoch(0, 900, 2, "5-0: missing field 'x'"))
    run_epoch_publish(run_id=run.pk, metrics=_broker_epoch(1, 0, 1, "9-1: bad"))
    run_epoch_publish(run_id=run.pk, metrics=_broker_epoch(2, 0, 0, None))
    stored = run_metrics(run=run, since_epoch=0)
    assert [e["backlog_rows"] for e in stored] == [900, 0, 0]
    assert stored[0]["broker_sources"]["events"]["lag"] == {"orders": 900}
    page = session_client(Role.VIEWER).get(f"/runs/{run.pk}/").content.decode()
    assert 'id="broker-sources"' in page and "hunter2" not in page
    broker = _config(page)["broker"]
    assert broker == {"events": {"url": SHOWN_URL, "streams": ["orders"], "dead_letters": 3,
                                 "sample": "9-1: bad"}}
    assert _config(page)["dag"]["operators"][0]["params"]["url"] == SHOWN_URL
