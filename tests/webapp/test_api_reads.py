"""API reads under load stay cheap and bounded: a fixed number of queries per request (none of
them a write), and every list answers one page at a time."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.webapp.conftest import epoch_metrics
from webapp.accounts.roles import Role
from webapp.audit.services import audit_record
from webapp.jobs.metrics import run_epoch_record
from webapp.jobs.models import Reconfiguration, Run

pytestmark = pytest.mark.django_db


def _queries(client, path: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path).status_code == 200
    return [q["sql"] for q in captured.captured_queries]


def _at_epoch(run: Run, epoch: int, counts_in: int) -> None:
    """The driver's publish of an epoch: its rows, then the run's current epoch."""
    run_epoch_record(run_id=run.pk, metrics=epoch_metrics(epoch, counts_in=counts_in,
                                                           counts_capacity=100))
    Run.objects.filter(pk=run.pk).update(current_epoch=epoch)


def test_run_and_job_reads_take_at_most_four_queries_and_write_nothing(token_client, live_run):
    client = token_client(Role.VIEWER)
    _at_epoch(live_run, 0, 10)
    client.get("/api/jobs")  # the first use of a token is recorded
    # The token, the run, its epoch's rows (two); the token, the job with its current run,
    # the versions.
    for path, queries in ((f"/api/runs/{live_run.pk}", 4), (f"/api/jobs/{live_run.job_id}", 3)):
        sql = _queries(client, path)
        assert len(sql) == queries, sql
        assert all(q.lstrip().upper().startswith("SELECT") for q in sql), sql


def test_an_epoch_read_once_is_answered_again_without_its_queries(token_client, live_run):
    client = token_client(Role.VIEWER)
    _at_epoch(live_run, 0, 10)
    client.get("/api/jobs")
    path = f"/api/runs/{live_run.pk}"
    first = client.get(path).json()
    # The token and the run; the epoch's rows were written once and are kept.
    assert len(_queries(client, path)) == 2
    assert client.get(path).json() == first

    _at_epoch(live_run, 1, 40)
    sql = _queries(client, path)
    answer = client.get(path).json()
    assert len(sql) == 4, sql
    assert answer["epoch"] == answer["metrics"]["epoch"] == 1
    assert answer["metrics"]["operators"]["counts"]["rows_in"] == 40
    assert first["metrics"]["operators"]["counts"]["rows_in"] == 10


def test_a_new_version_is_in_the_next_job_read(token_client, live_run):
    client = token_client(Role.EDITOR)
    path = f"/api/jobs/{live_run.job_id}"
    first = client.get(path).json()
    assert first["current_run"] == {"id": live_run.pk, "status": live_run.status}
    assert len(_queries(client, path)) == 2  # token, job with its current run: versions kept
    dag = first["versions"][-1]["dag"]
    created = client.post(f"{path}/versions", {"dag": dag, "base_version": 1,
                                               "comment": "again"},
                          content_type="application/json")
    assert created.status_code == 201, created.json()
    versions = client.get(path).json()["versions"]
    assert [(v["number"], v["comment"]) for v in versions][-1] == (2, "again")
    assert len(versions) == len(first["versions"]) + 1


def _runs(job, n: int) -> None:
    version = job.versions.get(number=1)
    Run.objects.bulk_create([Run(job=job, version=version, status="stopped",
                                 spark_master="local[2]", checkpoint_location="/x")
                             for _ in range(n)])


def test_runs_are_listed_a_page_at_a_time(token_client, job):
    _runs(job, 7)
    client = token_client(Role.VIEWER)
    first = client.get(f"/api/jobs/{job.pk}/runs?page_size=3").json()
    assert len(first["runs"]) == 3 and first["page"] == {"number": 1, "size": 3, "next": 2}
    last = client.get(f"/api/jobs/{job.pk}/runs?page_size=3&page=3").json()
    assert len(last["runs"]) == 1 and last["page"]["next"] is None
    ids = [r["id"] for r in first["runs"]]
    assert ids == sorted(ids, reverse=True)  # newest first
    assert client.get("/api/jobs/999999/runs").status_code == 404


@pytest.mark.parametrize(("query", "named"), [
    ("page=0", "page"), ("page=x", "page"), ("page_size=501", "page_size"),
    ("page_size=0", "page_size"),
])
def test_bad_page_parameters_are_named(token_client, job, query, named):
    answer = token_client(Role.VIEWER).get(f"/api/jobs/{job.pk}/runs?{query}")
    assert answer.status_code == 400 and named in answer.json()["error"]


def test_default_and_largest_pages(token_client, job):
    _runs(job, 60)
    client = token_client(Role.VIEWER)
    assert len(client.get(f"/api/jobs/{job.pk}/runs").json()["runs"]) == 50
    assert len(client.get(f"/api/jobs/{job.pk}/runs?page_size=500").json()["runs"]) == 60


def test_reconfigurations_and_history_are_paged(token_client, live_run):
    Reconfiguration.objects.bulk_create([
        Reconfiguration(run=live_run, request_id=f"r{i}", kind="rescale", reason="test")
        for i in range(5)])
    client = token_client(Role.VIEWER)
    page = client.get(f"/api/runs/{live_run.pk}/reconfigurations?page_size=2&page=2").json()
    assert [r["request_id"] for r in page["reconfigurations"]] == ["r2", "r1"]
    assert page["page"]["next"] == 3
    audit_record(actor=None, trigger="policy", action="run.note", subject=live_run.job)
    history = client.get(f"/api/jobs/{live_run.job_id}/history?page_size=1").json()
    assert [e["action"] for e in history["entries"]] == ["run.note"]
    assert history["page"]["next"] == 2


def test_metrics_are_paged_by_epoch(token_client, live_run):
    for epoch in range(5):
        run_epoch_record(run_id=live_run.pk, metrics=epoch_metrics(epoch, counts_in=10,
                                                                    counts_capacity=100))
    client = token_client(Role.VIEWER)
    page = client.get(f"/api/runs/{live_run.pk}/metrics?since_epoch=1&limit=2").json()
    assert [e["epoch"] for e in page["epochs"]] == [1, 2] and page["next_since_epoch"] == 3
    rest = client.get(f"/api/runs/{live_run.pk}/metrics?since_epoch=3&limit=2").json()
    assert [e["epoch"] for e in rest["epochs"]] == [3, 4] and rest["next_since_epoch"] is None
    bad = client.get(f"/api/runs/{live_run.pk}/metrics?limit=1000")
    assert bad.status_code == 400 and "limit" in bad.json()["error"]


def test_the_run_read_in_one_query_answers_as_the_whole_run_does(live_run):
    from webapp.runs import selectors

    _at_epoch(live_run, 0, 10)
    whole = selectors.run_as_json(selectors.run_get(run_id=live_run.pk))
    assert selectors.run_as_json(selectors.run_answer_get(run_id=live_run.pk)) == whole
    assert whole["version"] == 1 and whole["parallelism"]["counts"] == 2


_SERVER_START = """
import gc, os, threading
os.environ["STREAMSCALE_WEB_PREPARE_AT_START"] = "1"
import webapp.asgi
for thread in threading.enumerate():
    if thread.name == "expression-parser-start":
        thread.join(timeout=120)
print(len(gc.get_objects()), gc.get_freeze_count())
"""


@pytest.mark.spark
def test_a_prepared_server_leaves_its_start_out_of_every_collection():
    """What a web server loads at start, Spark's parser included (started in the background),
    is frozen out of the collector: a full collection walks only what requests made since,
    instead of stopping every request thread of the process for tens of milliseconds."""
    import subprocess
    import sys

    from tests.webapp.support import ROOT, child_env

    done = subprocess.run([sys.executable, "-c", _SERVER_START], cwd=ROOT, env=child_env(),
                          capture_output=True, text=True, timeout=180, check=True)
    tracked, frozen = map(int, done.stdout.split()[-2:])
    assert frozen > 150_000  # the server's modules and Spark's Python side
    assert tracked < 2_000, f"{tracked} objects left to the collector after the start"
