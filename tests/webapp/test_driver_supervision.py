"""Supervision of real run drivers (Spark in local mode): a clean suspend and the next start are
not restarts and leave no JVM trace in the log; a crash is counted and named by its signal or exit
code; the job's own error fails the run at once, naming the operator; a run whose query does not
start in time fails, saying so; a run whose source has no data is running, idle."""

from __future__ import annotations

import copy
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.waiting import wait_for
from tests.webapp.conftest import SIMPLE_DAG
from webapp.accounts.roles import Role

pytestmark = [pytest.mark.spark, pytest.mark.django_db(transaction=True)]

# Spark's ANSI mode fails the cast of a string like 'click' at run time: every epoch fails.
FAILING_CONDITION = "CAST(event_type AS INT) IS NULL"


@pytest.fixture
def var_dir(tmp_path: Path, settings, monkeypatch) -> Path:
    """Drivers keep their checkpoints, logs and exit records in a private var folder."""
    settings.VAR_DIR = tmp_path
    monkeypatch.setenv("STREAMSCALE_VAR_DIR", str(tmp_path))
    monkeypatch.setenv("DATABASE_URL", _database_url())
    monkeypatch.setenv("REDIS_URL", settings.REDIS_URL)
    return tmp_path


def _database_url() -> str:
    from tests.webapp.support import database_url_for_children

    return database_url_for_children()


def _run(make_user, *, condition: str = "event_type = 'click'"):
    from webapp.jobs.models import Run, RunStatus, Trigger
    from webapp.jobs.services import job_create
    from webapp.runs.services import run_dir

    dag = copy.deepcopy(SIMPLE_DAG)
    dag["operators"][1]["params"]["condition"] = condition
    version = job_create(dag=dag, actor=make_user(Role.EDITOR), trigger=Trigger.USER)
    run = Run.objects.create(
        job=version.job, version=version, status=RunStatus.STARTING, spark_master="local[2]",
        checkpoint_location="", parallelism={"events": 1, "clicks": 1, "out": 1},
        target_dag=version.dag,
    )
    run.checkpoint_location = str(run_dir(run.pk) / "checkpoint")
    run.save(update_fields=["checkpoint_location"])
    return run


def _watch_until(predicate, *, timeout: float, what: str):
    """Supervision passes, as the beat runs them, until ``predicate`` holds."""
    from webapp.runs import supervision

    def watched():
        supervision.runs_watch()
        return predicate()

    return wait_for(watched, timeout=timeout, what=what)


def _fresh(run):
    run.refresh_from_db()
    return run


def _kill_driver(run) -> None:
    try:
        os.killpg(os.getpgid(run.driver_pid), signal.SIGKILL)
    except (ProcessLookupError, TypeError):
        pass


def _driver_log(run) -> str:
    from webapp.runs.services import run_dir

    return (run_dir(run.pk) / "driver.log").read_text(errors="replace")


def _audit_reasons(run, action: str) -> list[str]:
    from webapp.audit.models import AuditEntry

    return list(AuditEntry.objects.filter(run_id_ref=run.pk, action=action)
                .order_by("at").values_list("reason", flat=True))


def test_suspend_and_resume_are_not_restarts_and_a_crash_is_named(var_dir, make_user) -> None:
    from webapp.jobs.models import RunStatus
    from webapp.runs import supervision

    run = _run(make_user)
    try:
        supervision.run_launch(run_id=run.pk)
        wait_for(lambda: _fresh(run).status == RunStatus.RUNNING, timeout=240, what="a first epoch")
        first_pid = run.driver_pid

        assert supervision.drivers_suspend(grace_s=60) == [
            f"run {run.pk}: driver {first_pid} suspended"]
        assert "StackOverflowError" not in _driver_log(run)
        assert "Exception in thread" not in _driver_log(run)

        # The next start resumes the run: the watcher relaunches it without counting a crash
        # (once what the suspended driver left, its JVM, is gone).
        _watch_until(lambda: _fresh(run).driver_pid != first_pid, timeout=60, what="the resume")
        resumed = _fresh(run)
        resumed_pid, epoch = resumed.driver_pid, resumed.current_epoch or 0
        assert resumed.restarts == 0 and resumed_pid != first_pid
        assert resumed.status == RunStatus.RUNNING and not _audit_reasons(run, "run.recovering")
        wait_for(lambda: (_fresh(run).current_epoch or 0) > epoch + 1, timeout=240,
              what="epochs after the resume")

        # A crash is one: counted, and named by the signal that ended the driver.
        _kill_driver(run)
        _watch_until(lambda: _fresh(run).driver_pid != resumed_pid, timeout=60,
                     what="the restart")
        assert _fresh(run).restarts == 1
        assert _audit_reasons(run, "run.recovering") == [
            f"driver {resumed_pid} was killed by SIGKILL; a transient failure, restarting from "
            "the checkpoint"]
    finally:
        _kill_driver(_fresh(run))


@pytest.mark.parametrize(("condition", "error_class"), [
    (FAILING_CONDITION, "CAST_INVALID_INPUT"), ("amount / 0 > 1", "DIVIDE_BY_ZERO")])
def test_the_jobs_own_error_fails_the_run_at_once_naming_operator_and_cause(
        var_dir, make_user, condition: str, error_class: str) -> None:
    from webapp.jobs.models import RunStatus
    from webapp.runs import supervision

    run = _run(make_user, condition=condition)
    try:
        supervision.run_launch(run_id=run.pk)
        wait_for(lambda: not psutil.pid_exists(_fresh(run).driver_pid) or
              psutil.Process(run.driver_pid).status() == psutil.STATUS_ZOMBIE,
              timeout=240, what="the driver's end")
        wait_for(lambda: supervision.runs_watch(), timeout=30, what="the failure")

        failed = _fresh(run)
        assert failed.status == RunStatus.FAILED and failed.restarts == 0
        first_line = failed.failure_reason.splitlines()[0]
        assert first_line.startswith(f"operator 'clicks': driver {failed.driver_pid} exited "
                                     "with code 3: the query failed: ")
        assert error_class in first_line
        assert first_line.endswith("; the job's own error, not retried")
        assert _audit_reasons(run, "run.recovering") == []
        # The failing epoch's report, with its trace, is in the driver's output.
        output = _driver_log(run)
        assert "epoch 0 failed; the run ends" in output
        assert "Traceback (most recent call last)" in output and error_class in output
    finally:
        _kill_driver(_fresh(run))


def test_a_run_whose_query_does_not_start_in_time_fails_with_the_reason(
    var_dir, make_user, settings
) -> None:
    from webapp.jobs.models import RunStatus
    from webapp.runs import supervision
    from webapp.runs.process import driver_alive

    settings.RUN_START_TIMEOUT_S = 2
    run = _run(make_user)
    try:
        supervision.run_launch(run_id=run.pk)
        pid = _fresh(run).driver_pid
        time.sleep(2.5)  # the JVM alone takes longer than this to start

        assert supervision.runs_watch() == [
            f"run {run.pk}: failed: the epoch loop did not start in time"]

        failed = _fresh(run)
        assert failed.status == RunStatus.FAILED
        assert failed.failure_reason.startswith(
            "the run's epoch loop did not start within 2 s of the driver's start "
            "(RUN_START_TIMEOUT_S)")
        wait_for(lambda: not driver_alive(pid, run.pk), timeout=10, what="the driver's end")
    finally:
        _kill_driver(_fresh(run))


def _idle_stream_run(make_user, stream: str):
    """A run reading a Redis stream nobody writes to (yet)."""
    from webapp.jobs.models import Run, RunStatus, Trigger
    from webapp.jobs.services import job_create
    from webapp.runs.services import run_dir

    dag = {
        "name": "idle-stream", "key_groups": 16,
        "operators": [
            {"id": "events", "type": "source.redis_stream",
             "params": {"url": "env:REDIS_URL", "streams": [stream], "start": "earliest",
                        "schema": {"order_id": "long", "amount": "double"}}},
            {"id": "out", "type": "sink.memory", "params": {}},
        ],
        "edges": [{"from": "events", "to": "out"}],
    }
    version = job_create(dag=dag, actor=make_user(Role.EDITOR), trigger=Trigger.USER)
    run = Run.objects.create(
        job=version.job, version=version, status=RunStatus.STARTING, spark_master="local[2]",
        checkpoint_location="", parallelism={"events": 1, "out": 1}, target_dag=version.dag,
    )
    run.checkpoint_location = str(run_dir(run.pk) / "checkpoint")
    run.save(update_fields=["checkpoint_location"])
    return run


def _rows_read(run) -> int:
    from webapp.jobs.models import OperatorEpoch

    return sum(OperatorEpoch.objects.filter(run=run, operator_id="out")
               .values_list("rows_in", flat=True))


def test_a_run_whose_source_has_no_data_is_running_idle_also_after_a_crash(
        var_dir, make_user, settings) -> None:
    import uuid

    import redis

    from webapp.jobs.models import RunStatus
    from webapp.runs import supervision
    from webapp.runs.selectors import run_activity_of, run_answer_get, run_as_json

    stream = f"streamscale:test:idle:{uuid.uuid4().hex}"
    broker = redis.Redis.from_url(settings.REDIS_URL)
    run = _idle_stream_run(make_user, stream)
    try:
        supervision.run_launch(run_id=run.pk)
        wait_for(lambda: _fresh(run).status == RunStatus.RUNNING, timeout=240,
              what="the run to be running with no data")
        # A run's first epoch fixes where its sources start, data or not; then none runs.
        assert run.epochs.count() <= 1 and run.driver_heartbeat_at is not None
        wait_for(lambda: run_activity_of(run=_fresh(run)) == "idle: waiting for data", timeout=60,
              what="the run to say it is idle")
        assert run_as_json(run_answer_get(run_id=run.pk))["activity"] == "idle: waiting for data"

        # The start timeout asks whether the query started, not whether data came.
        settings.RUN_START_TIMEOUT_S = 1
        assert supervision.runs_watch() == []
        beat = _fresh(run).driver_heartbeat_at
        wait_for(lambda: _fresh(run).driver_heartbeat_at > beat, timeout=30,
              what="the driver's next heartbeat")

        # A crash is transient: the restarted driver's run is running again, still idle.
        killed = run.driver_pid
        _kill_driver(run)

        def restarted() -> bool:
            supervision.runs_watch()
            return _fresh(run).driver_pid not in (None, killed)

        wait_for(restarted, timeout=60, what="the restart")
        wait_for(lambda: _fresh(run).status == RunStatus.RUNNING and
              _fresh(run).driver_heartbeat_at > beat, timeout=240, what="running after the restart")
        assert _fresh(run).restarts == 1 and run.epochs.count() <= 1
        assert supervision.runs_watch() == []

        # Entries written now are read, each once.
        for n in range(25):
            broker.xadd(stream, {"order_id": str(n), "amount": "1.5"})
        wait_for(lambda: _rows_read(run) >= 25, timeout=120, what="the entries to be read")
        assert _rows_read(run) == 25
        assert run_activity_of(run=_fresh(run)) == "processing"
    finally:
        _kill_driver(_fresh(run))
        broker.delete(stream)
