"""Factories and clients for the web application's tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from django.test import Client

from tests.webapp.support import ROOT, child_env
from webapp.accounts.roles import Role


def chain_dag(name: str, *operators: dict) -> dict:
    """A job of ``operators`` in a chain, each feeding the next; 16 key groups."""
    return {
        "name": name,
        "key_groups": 16,
        "operators": list(operators),
        "edges": [{"from": a["id"], "to": b["id"]} for a, b in pairwise(operators)],
    }


SIMPLE_DAG = chain_dag(
    "clicks",
    {"id": "events", "type": "source.generator", "params": {"rows_per_second": 100}},
    {"id": "clicks", "type": "filter", "params": {"condition": "event_type = 'click'"}},
    {"id": "out", "type": "sink.memory", "params": {}},
)


@pytest.fixture
def simple_dag() -> dict:
    import copy

    return copy.deepcopy(SIMPLE_DAG)


@pytest.fixture
def make_user(db):
    from webapp.accounts.services import user_create

    def make(role: str = Role.VIEWER, name: str | None = None, password: str = "pw-12345678"):
        return user_create(username=name or f"{role}-user", role=role, password=password)

    return make


@pytest.fixture
def token_client(make_user):
    """A client authenticated by a bearer token for a fresh user of the given role."""
    from webapp.accounts.services import api_token_create

    def make(role: str) -> Client:
        user = make_user(role, name=f"{role}-token")
        token = api_token_create(user=user)
        return Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    return make


@pytest.fixture
def session_client(make_user):
    """A client signed in through the login page as a fresh user of the given role."""

    def make(role: str) -> Client:
        make_user(role, name=f"{role}-session")
        client = Client()
        response = client.post(
            "/login/", {"username": f"{role}-session", "password": "pw-12345678"}
        )
        assert response.status_code == 302, response.content
        return client

    return make


@pytest.fixture
def job(make_user, simple_dag):
    from webapp.jobs.models import Trigger
    from webapp.jobs.services import job_create

    editor = make_user(Role.EDITOR, name="job-author")
    return job_create(dag=simple_dag, actor=editor, trigger=Trigger.USER, comment="first").job


@pytest.fixture
def celery_worker_process(transactional_db) -> Iterator[subprocess.Popen]:
    """A real Celery worker, in its own process, on the real broker and the test database."""
    celery = Path(sys.executable).parent / "celery"
    worker = subprocess.Popen(
        [
            str(celery),
            "-A",
            "webapp",
            "worker",
            "--pool=solo",
            "--concurrency=1",
            "--loglevel=warning",
            "--without-gossip",
            "--without-mingle",
            "-n",
            f"test-{os.getpid()}@%h",
        ],
        cwd=ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        _wait_for_worker(worker)
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()


def _wait_for_worker(worker: subprocess.Popen) -> None:
    from webapp.celery import app

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise RuntimeError(f"celery worker exited: {worker.stdout.read()}")
        replies = app.control.ping(timeout=1.0)
        if any(f"test-{os.getpid()}@" in name for reply in replies for name in reply):
            return
    raise RuntimeError("celery worker did not answer a ping within 60 s")


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # The production hasher is slow on purpose; tests create many users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def no_warm_standby(settings):
    # Watch passes run here in the test's process, on a var folder of the test's: a standby
    # they started would outlive the test. The product's standby is tested on whole stacks
    # (test_standby.py), whose launcher stops it.
    settings.WARM_STANDBY = False


KEYED_DAG = chain_dag(
    "counts-job",
    {"id": "events", "type": "source.generator", "params": {"rows_per_second": 1000}},
    {"id": "views", "type": "filter", "params": {"condition": "event_type = 'view'"}},
    {
        "id": "counts",
        "type": "window_aggregate",
        "parallelism": 2,
        "params": {
            "key": ["campaign_id"],
            "time": "event_time",
            "window": "10 seconds",
            "watermark": "5 seconds",
            "aggregates": {"views": "count(*)"},
        },
    },
    {"id": "out", "type": "sink.memory", "params": {}},
)


@pytest.fixture
def live_run(make_user):
    """A run recorded as running (no driver): for the control plane's own rules."""
    import copy

    from webapp.jobs.models import Run, RunStatus, Trigger
    from webapp.jobs.services import job_create

    editor = make_user(Role.EDITOR, name="run-author")
    version = job_create(dag=copy.deepcopy(KEYED_DAG), actor=editor, trigger=Trigger.USER)
    return Run.objects.create(
        job=version.job,
        version=version,
        status=RunStatus.RUNNING,
        spark_master="local[2]",
        checkpoint_location="/nonexistent",
        parallelism={"events": 1, "views": 1, "counts": 2, "out": 1},
        target_dag=version.dag,
        current_epoch=10,
    )


def published_epoch(epoch: int, operators: dict, *, batch_ms: float,
                    latency: tuple[float, float, float]) -> dict:
    """An epoch as a driver publishes it: its ``operators``' figures, its batch time and its
    latency (p50, p99, max), no backlog."""
    p50, p99, highest = latency
    return {
        "epoch": epoch,
        "batch_duration_ms": batch_ms,
        "backlog_rows": 0,
        "latency_ms": {"p50": p50, "p99": p99, "max": highest},
        "operators": operators,
    }


def operator_figures(*, rows_in, rows_out, busy_ms: list[float], input_rate, processing_rate,
                     output_rate, instances: int = 1, congested: bool = False) -> dict:
    """One operator's figures in a published epoch (ETP 1)."""
    return {
        "instances": instances,
        "rows_in": rows_in,
        "rows_out": rows_out,
        "busy_ms": busy_ms,
        "input_rate": input_rate,
        "processing_rate": processing_rate,
        "output_rate": output_rate,
        "congested": congested,
        "etp": 1.0,
    }


def epoch_metrics(epoch: int, *, counts_in: float, counts_capacity: float, instances: int = 2):
    """An epoch as a driver publishes it, with `counts` receiving `counts_in` rows/s."""
    return published_epoch(epoch, {
        "events": operator_figures(
            rows_in=0, rows_out=int(counts_in * 3), busy_ms=[50.0], input_rate=None,
            processing_rate=None, output_rate=counts_in * 3),
        "views": operator_figures(
            rows_in=int(counts_in * 3), rows_out=int(counts_in), busy_ms=[100.0],
            input_rate=counts_in * 3, processing_rate=counts_in * 30, output_rate=counts_in),
        "counts": operator_figures(
            instances=instances, rows_in=int(counts_in), rows_out=10,
            busy_ms=[900.0] * instances, input_rate=counts_in, processing_rate=counts_capacity,
            output_rate=10.0, congested=counts_in > 1.2 * counts_capacity),
        "out": operator_figures(
            rows_in=10, rows_out=10, busy_ms=[5.0], input_rate=10.0, processing_rate=10000.0,
            output_rate=10.0),
    }, batch_ms=1000.0, latency=(800.0, 1500.0, 1700.0))
