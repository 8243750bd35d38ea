"""One driver per run: the watcher starts no successor while anything of the ended driver's
process group (its JVM, Python workers) lives, and kills what is left after a bound. Real
processes stand in for the driver and what it left."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.webapp.support import LEFTOVER_DRIVER, process_alive

pytestmark = pytest.mark.django_db

# What a driver leaves in its process group: a process that ignores SIGTERM (as a JVM busy
# with its query may).
_LEFTOVER = ("import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
             "print('ready', flush=True); time.sleep(300)")


def _until(predicate, what: str, timeout_s: float = 30.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"waited {timeout_s:.0f} s for {what}"
        time.sleep(0.1)


def _ended_driver_with_a_leftover(folder: Path) -> tuple[int, int]:
    folder.mkdir(parents=True, exist_ok=True)
    pid_path = folder / "leftover.pid"
    driver = subprocess.Popen([sys.executable, "-c", LEFTOVER_DRIVER, str(pid_path), _LEFTOVER],
                              start_new_session=True)
    driver.wait(timeout=30)
    (folder / "driver-exit.json").write_text(
        json.dumps({"pid": driver.pid, "code": -9, "at": time.time()}))
    return driver.pid, int(pid_path.read_text())


def test_no_successor_starts_while_the_drivers_group_lives(live_run, settings, tmp_path,
                                                           monkeypatch) -> None:
    from webapp.jobs.models import Run, RunStatus
    from webapp.runs import supervision
    from webapp.runs.services import run_dir

    settings.VAR_DIR = tmp_path
    driver, leftover = _ended_driver_with_a_leftover(run_dir(live_run.pk))
    Run.objects.filter(pk=live_run.pk).update(driver_pid=driver,
                                              driver_host=socket.gethostname())
    try:
        assert os.getpgid(leftover) == driver  # still in the ended driver's group
        waiting = _until(supervision.runs_watch, "the watcher to act once the back-off ended")
        assert waiting == [f"run {live_run.pk}: waiting for what driver {driver} left "
                           f"({leftover}) to end before a restart"]
        live_run.refresh_from_db()
        assert live_run.driver_pid == driver and live_run.restarts == 0
        assert live_run.status == RunStatus.RUNNING

        monkeypatch.setattr(supervision, "GROUP_GONE_WAIT_S", 0.0)
        assert supervision.runs_watch() == [
            f"run {live_run.pk}: killed what driver {driver} left ({leftover}), alive 0 s "
            "after it ended; restarting once it is gone"]
        _until(lambda: not process_alive(leftover), "the leftover's end")
        live_run.refresh_from_db()
        assert live_run.driver_pid == driver and live_run.restarts == 0
    finally:
        if process_alive(leftover):
            os.kill(leftover, signal.SIGKILL)
        live_run.refresh_from_db()
        if live_run.driver_pid not in (None, driver):  # a successor started anyway
            os.killpg(live_run.driver_pid, signal.SIGKILL)
