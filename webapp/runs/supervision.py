"""Driver supervision: launch a run's driver, notice within seconds when it dies, restart it
from its checkpoint as the run's restart strategy says after a transient failure, and fail the
run at once, naming the operator and the cause, on the job's own error."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import time

import psutil
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from webapp.config import BASE_DIR, database_url_of
from webapp.jobs.models import ACTIVE_RUN_STATUSES, Run, RunStatus
from webapp.runs.exits import DriverEnd, driver_end
from webapp.runs.process import (
    driver_alive,
    driver_signal,
    driver_spawn,
    group_leftovers,
    log_tail,
)
from webapp.runs.restarts import RESET_AFTER_S, restart_policy_of_run
from webapp.runs.services import run_dir, run_driver_recorded, run_status_set
from webapp.runs.standby import standby_keep, standby_take

# Crashes further apart than this are not a crash loop: the restart count starts again.
RESTART_WINDOW_S = RESET_AFTER_S
STOP_GRACE_S = 60.0
# How long an ended driver's process group may outlive it before the watcher kills what is left
# (its reaper sends SIGTERM at once and SIGKILL after 10 s).
GROUP_GONE_WAIT_S = 15.0
SPARK_LOCAL_DIR = "spark-local"


def run_launch(*, run_id: int, resume: bool = False) -> str:
    """Start the driver of a starting or recovering run (with ``resume``, of any active run
    but a stopping one); a no-op if it is alive or finished."""
    launchable = (RunStatus.STARTING, RunStatus.RECOVERING) + ((RunStatus.RUNNING,) if resume
                                                              else ())
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status not in launchable:
            return "nothing to launch"
        if driver_alive(run.driver_pid, run.pk):
            return f"driver {run.driver_pid} is alive"
        env = _driver_env()
        pid = standby_take(run_id=run.pk, env=env, master=run.spark_master)
        how = "taken over by the warm standby" if pid else "started"
        if pid is None:
            # Spark's temporary files: a driver killed by a signal leaves its JVM's behind.
            local_dirs = run_dir(run.pk) / SPARK_LOCAL_DIR
            shutil.rmtree(local_dirs, ignore_errors=True)
            pid = driver_spawn(
                args=[str(run.pk)], log_path=run_dir(run.pk) / "driver.log",
                cwd=BASE_DIR, env={**env, "SPARK_LOCAL_DIRS": str(local_dirs)},
            )
        run_driver_recorded(run_id=run.pk, pid=pid, host=socket.gethostname())
        Run.objects.filter(pk=run.pk).update(driver_launched_at=timezone.now())
    return f"driver {pid} {how}"


def runs_watch() -> list[str]:
    """One supervision pass over the active runs on this host, then the upkeep of its warm
    standby driver."""
    actions = []
    runs = Run.objects.filter(status__in=ACTIVE_RUN_STATUSES, driver_host=socket.gethostname())
    for run in runs:
        action = _watch(run)
        if action:
            actions.append(f"run {run.pk}: {action}")
    starting = runs.filter(status__in=(RunStatus.STARTING, RunStatus.RECOVERING)).exists()
    kept = standby_keep(env=_driver_env(), master=settings.SPARK_MASTER, starting=starting)
    return [*actions, kept] if kept else actions


def _watch(run: Run) -> str | None:
    alive = driver_alive(run.driver_pid, run.pk)
    if run.status == RunStatus.STOPPING:
        return _watch_stopping(run, alive)
    if alive:
        return _watch_query_start(run)
    ended = driver_end(run_dir(run.pk), pid=run.driver_pid)
    if ended is not None and ended.suspended:
        # A clean suspend (the product was stopped) is not a crash: resume, budget untouched.
        return _predecessor_left(run, ended) or run_launch(run_id=run.pk, resume=True)
    how = f"driver {run.driver_pid} " + (ended.describe() if ended else "died")
    tail = log_tail(run_dir(run.pk) / "driver.log") or "(no output)"
    if ended is not None and ended.job_error:
        # The job's own error recurs on the same data and plan: a restart only spends time.
        where = f"operator {ended.operator!r}: " if ended.operator else ""
        run_status_set(run_id=run.pk, status=RunStatus.FAILED, output=tail,
                       detail=f"{where}{how}; the job's own error, not retried")
        return "failed: the job's own error"
    if _seconds_since(run.driver_launched_at) > RESTART_WINDOW_S and run.restarts:
        run.restarts = 0  # up long enough: no crash loop, the count and back-off start again
    policy = restart_policy_of_run(run)
    delay = policy.delay_before(run.restarts + 1)
    if delay is None:
        run_status_set(run_id=run.pk, status=RunStatus.FAILED, output=tail,
                       detail=f"{how}; not restarted: {run.restarts + 1} crashes in a row, more "
                              f"than its restart strategy allows ({policy.describe()})")
        return "failed"
    waited = policy.waited(since_launch_s=_seconds_since(run.driver_launched_at),
                           since_crash_s=_seconds_since_crash(run, ended))
    if waited < delay:
        return None  # the back-off: retried once the delay has passed
    left = _predecessor_left(run, ended)
    if left:
        return left
    # Watch passes may overlap (one per beat, two worker processes): only the pass that
    # still finds the dead driver recorded restarts it, so a restart is never doubled.
    with transaction.atomic():
        restarted = Run.objects.filter(
            pk=run.pk, driver_pid=run.driver_pid, status=run.status).update(
            restarts=run.restarts + 1, driver_pid=None)
        if not restarted:
            return None
        run_status_set(run_id=run.pk, status=RunStatus.RECOVERING, output=tail,
                       detail=f"{how}; a transient failure, restarting from the checkpoint")
    return run_launch(run_id=run.pk)


def _predecessor_left(run: Run, ended: DriverEnd | None) -> str | None:
    """One driver per run, ever: while anything of the ended driver's process group lives
    (a JVM still running its query would collide with a successor's on the checkpoint), no
    successor starts. The reaper ends the group (SIGTERM, SIGKILL after 10 s); what is left
    after ``GROUP_GONE_WAIT_S`` is killed here. None once the group is gone."""
    born_before = ended.ended_at if ended is not None and ended.ended_at else time.time()
    left = group_leftovers(run.driver_pid, born_before=born_before)
    if not left:
        return None
    pids = ", ".join(str(process.pid) for process in left)
    if _seconds_since_crash(run, ended) < GROUP_GONE_WAIT_S:
        return f"waiting for what driver {run.driver_pid} left ({pids}) to end before a restart"
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()
    return (f"killed what driver {run.driver_pid} left ({pids}), alive "
            f"{GROUP_GONE_WAIT_S:.0f} s after it ended; restarting once it is gone")


def _seconds_since_crash(run: Run, ended: DriverEnd | None) -> float:
    """Since the driver ended, as its reaper recorded it; since its launch without a record
    (the reaper itself was killed), which errs towards restarting sooner."""
    if ended is not None and ended.ended_at is not None:
        return time.time() - ended.ended_at
    return _seconds_since(run.driver_launched_at)


def _watch_query_start(run: Run) -> str | None:
    """A driver whose query has not started long after the driver's launch is stuck: fail
    the run, naming the wait and the driver's last word, and stop the driver. Whether data
    has come is not asked: a run whose query waits for data is running (idle)."""
    if run.status not in (RunStatus.STARTING, RunStatus.RECOVERING):
        return None
    waited = _seconds_since(run.driver_launched_at)
    limit = settings.RUN_START_TIMEOUT_S
    if waited <= limit:
        return None
    tail = log_tail(run_dir(run.pk) / "driver.log") or "(no output)"
    last = tail.splitlines()[-1]
    run_status_set(run_id=run.pk, status=RunStatus.FAILED, output=tail,
                   detail=f"the run's epoch loop did not start within {limit:.0f} s of the "
                          f"driver's start (RUN_START_TIMEOUT_S); not retried; the driver's last "
                          f"output: {last}")
    driver_signal(run.driver_pid, run.pk, signal.SIGKILL)
    return "failed: the epoch loop did not start in time"


def _seconds_since(moment) -> float:
    return float("inf") if moment is None else (timezone.now() - moment).total_seconds()


def drivers_suspend(*, grace_s: float) -> list[str]:
    """SIGTERM this host's drivers so they stop their queries cleanly, keeping their runs
    active; SIGKILL any still alive after `grace_s`. Used when the product shuts down."""
    runs = list(Run.objects.filter(status__in=ACTIVE_RUN_STATUSES,
                                   driver_host=socket.gethostname()))
    signalled = [run for run in runs
                 if driver_signal(run.driver_pid, run.pk, whole_group=False)]
    deadline = time.monotonic() + grace_s
    lines = []
    for run in signalled:
        while driver_alive(run.driver_pid, run.pk) and time.monotonic() < deadline:
            time.sleep(0.2)
        if driver_alive(run.driver_pid, run.pk):
            driver_signal(run.driver_pid, run.pk, signal.SIGKILL)
            lines.append(f"run {run.pk}: driver {run.driver_pid} killed after {grace_s:.0f} s")
        else:
            lines.append(f"run {run.pk}: driver {run.driver_pid} suspended")
    return lines


def _watch_stopping(run: Run, alive: bool) -> str | None:
    if not alive:
        run_status_set(run_id=run.pk, status=RunStatus.STOPPED)
        return "stopped"
    stopping_since = _stopping_since(run)
    if stopping_since > STOP_GRACE_S * 1.5:
        driver_signal(run.driver_pid, run.pk, signal.SIGKILL)
        return "killed after the grace period"
    if stopping_since > STOP_GRACE_S:
        driver_signal(run.driver_pid, run.pk, whole_group=False)
        return "terminated after the grace period"
    return None


def _stopping_since(run: Run) -> float:
    from webapp.audit.models import AuditEntry

    entry = (AuditEntry.objects.filter(run_id_ref=run.pk, action="run.stopped")
             .order_by("-at").first())
    return (timezone.now() - entry.at).total_seconds() if entry else 0.0


def _driver_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url_of(settings.DATABASES["default"]),
        REDIS_URL=settings.REDIS_URL,
        NATS_URL=settings.NATS_URL,
        SPARK_MASTER=settings.SPARK_MASTER,
        DJANGO_SETTINGS_MODULE="webapp.settings",
        PYTHONUNBUFFERED="1",
        STREAMSCALE_DATA_DIR=str(settings.DATA_DIR),
        STREAMSCALE_SINK_DSN=settings.SINK_DATABASE_URL,
        STREAMSCALE_SINK_SCHEMA=settings.SINK_SCHEMA,
    )
    return env

