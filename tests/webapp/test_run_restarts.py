"""A run's restart strategy: asked for in the start body, shown by the API and the run page,
and followed by the watcher; the job's own error fails the run at once whatever it says."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from webapp.accounts.roles import Role
from webapp.jobs.models import RestartStrategy
from webapp.runs.restarts import RestartPolicy


def test_exponential_restarts_at_once_then_doubles_from_1_s_to_60_s_without_end() -> None:
    policy = RestartPolicy()
    assert [policy.delay_before(n) for n in range(1, 10)] == [0, 1, 2, 4, 8, 16, 32, 60, 60]
    assert policy.delay_before(10_000) == 60


def test_fixed_allows_its_attempts_and_none_allows_none() -> None:
    fixed = RestartPolicy(strategy=RestartStrategy.FIXED, attempts=2, delay_s=5.0)
    assert [fixed.delay_before(n) for n in (1, 2, 3)] == [5.0, 5.0, None]
    assert RestartPolicy(strategy=RestartStrategy.NONE).delay_before(1) is None


@pytest.mark.django_db
def test_the_start_body_sets_the_strategy_and_the_api_and_page_show_it(
        token_client, session_client, job) -> None:
    api = token_client(Role.OPERATOR)
    body = {"restart": {"strategy": "fixed", "attempts": 2, "delay_s": 5}}
    started = api.post(f"/api/jobs/{job.pk}/runs", data=json.dumps(body),
                       content_type="application/json")
    assert started.status_code == 202, started.content
    run_id = started.json()["run_id"]
    shown = api.get(f"/api/runs/{run_id}").json()
    assert shown["restart"] == {"strategy": "fixed", "attempts": 2, "delay_s": 5.0}
    page = session_client(Role.VIEWER).get(f"/runs/{run_id}/").content.decode()
    assert "fixed: 2 attempts, each 5 s after its crash" in page


@pytest.mark.django_db
def test_a_start_without_a_strategy_restarts_exponentially(token_client, job) -> None:
    api = token_client(Role.OPERATOR)
    started = api.post(f"/api/jobs/{job.pk}/runs", data="{}", content_type="application/json")
    shown = api.get(f"/api/runs/{started.json()['run_id']}").json()
    assert shown["restart"] == {"strategy": "exponential", "attempts": None, "delay_s": None}


@pytest.mark.django_db
def test_attempts_of_another_strategy_are_refused_naming_the_field(token_client, job) -> None:
    body = {"restart": {"strategy": "exponential", "attempts": 3}}
    refused = token_client(Role.OPERATOR).post(
        f"/api/jobs/{job.pk}/runs", data=json.dumps(body), content_type="application/json")
    assert refused.status_code == 400
    assert refused.json()["problems"] == [
        {"where": "field restart.attempts",
         "message": "applies to the fixed strategy only, not to exponential"}]


# --- the watcher, over a driver that has ended (a real process, its records as written) ---


def _ended_driver(folder, *, code: int, cause: str | None = None,
                  operator: str | None = None) -> int:
    """The pid of a process that has exited, with the reaper's (and the driver's) records."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "driver-exit.json").write_text(
        json.dumps({"pid": process.pid, "code": code, "at": time.time()}))
    if cause is not None:
        (folder / "driver-cause.json").write_text(
            json.dumps({"pid": process.pid, "cause": cause, "operator": operator}))
    return process.pid


def _crashed_run(live_run, settings, tmp_path, **driver):
    from webapp.jobs.models import Run, RunStatus
    from webapp.runs.services import run_dir

    settings.VAR_DIR = tmp_path
    pid = _ended_driver(run_dir(live_run.pk), **driver)
    Run.objects.filter(pk=live_run.pk).update(
        status=RunStatus.RUNNING, driver_pid=pid, driver_host=socket.gethostname())
    return live_run


@pytest.mark.django_db
def test_the_jobs_own_error_fails_the_run_at_once_naming_the_operator(
        live_run, settings, tmp_path) -> None:
    from webapp.jobs.models import RunStatus
    from webapp.runs.supervision import runs_watch

    run = _crashed_run(live_run, settings, tmp_path, code=3, operator="views",
                       cause="the query failed: [DIVIDE_BY_ZERO] Division by zero.")
    assert runs_watch() == [f"run {run.pk}: failed: the job's own error"]
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.restarts == 0
    assert run.failure_reason.splitlines()[0] == (
        f"operator 'views': driver {run.driver_pid} exited with code 3: the query failed: "
        "[DIVIDE_BY_ZERO] Division by zero.; the job's own error, not retried")


@pytest.mark.django_db
def test_a_crash_under_strategy_none_fails_the_run_naming_the_strategy(
        live_run, settings, tmp_path) -> None:
    from webapp.jobs.models import Run, RunStatus
    from webapp.runs.supervision import runs_watch

    run = _crashed_run(live_run, settings, tmp_path, code=-9)
    Run.objects.filter(pk=run.pk).update(restart_strategy=RestartStrategy.NONE)
    assert runs_watch() == [f"run {run.pk}: failed"]
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.failure_reason.splitlines()[0] == (
        f"driver {run.driver_pid} was killed by SIGKILL; not restarted: 1 crashes in a row, "
        "more than its restart strategy allows (none: the first crash fails the run)")


@pytest.fixture
def launched(monkeypatch) -> list[int]:
    """The runs the watcher launched a driver for (none is started)."""
    from webapp.runs import supervision

    runs: list[int] = []
    monkeypatch.setattr(supervision, "run_launch",
                        lambda *, run_id: runs.append(run_id) or "driver started")
    return runs


@pytest.mark.django_db
def test_a_transient_crash_waits_out_its_back_off(live_run, settings, tmp_path) -> None:
    from django.utils import timezone

    from webapp.jobs.models import Run, RunStatus
    from webapp.runs.supervision import runs_watch

    run = _crashed_run(live_run, settings, tmp_path, code=-9)
    # Five restarts of a driver launched a moment ago: a crash loop, the sixth waits 16 s.
    Run.objects.filter(pk=run.pk).update(restarts=5, driver_launched_at=timezone.now())
    assert runs_watch() == []
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.restarts == 5


@pytest.mark.django_db
def test_a_driver_up_longer_than_its_back_off_restarts_at_once(
        live_run, settings, tmp_path, launched) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from webapp.jobs.models import Run
    from webapp.runs import supervision

    run = _crashed_run(live_run, settings, tmp_path, code=-9)
    # The sixth restart waits 16 s after the fifth: this driver, its fifth, ran for 20 s.
    Run.objects.filter(pk=run.pk).update(
        restarts=5, driver_launched_at=timezone.now() - timedelta(seconds=20))
    assert supervision.runs_watch() == [f"run {run.pk}: driver started"]
    run.refresh_from_db()
    assert launched == [run.pk] and run.restarts == 6


@pytest.mark.django_db
def test_a_fixed_delay_counts_from_the_crash(live_run, settings, tmp_path) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from webapp.jobs.models import Run, RunStatus
    from webapp.runs.supervision import runs_watch

    run = _crashed_run(live_run, settings, tmp_path, code=-9)  # it crashed a moment ago
    Run.objects.filter(pk=run.pk).update(
        restart_strategy=RestartStrategy.FIXED, restart_attempts=3, restart_delay_s=5.0,
        driver_launched_at=timezone.now() - timedelta(seconds=20))
    assert runs_watch() == []
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.restarts == 0


@pytest.mark.django_db
def test_a_first_crash_restarts_at_once_and_overlapping_watches_restart_it_once(
        live_run, settings, tmp_path, launched) -> None:
    from webapp.jobs.models import Run
    from webapp.runs import supervision

    run = _crashed_run(live_run, settings, tmp_path, code=-9)
    stale = Run.objects.get(pk=run.pk)  # as a second, overlapping pass read it
    assert supervision.runs_watch() == [f"run {run.pk}: driver started"]
    assert supervision._watch(stale) is None  # its driver is no longer the one recorded
    run.refresh_from_db()
    assert launched == [run.pk] and run.restarts == 1
