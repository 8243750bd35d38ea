"""The reaper of a run's driver: once the driver exits, what it left in its process group
(Spark's JVM, when the driver died while the JVM was starting) is ended too, politely
first and by force when it does not listen."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.webapp.support import LEFTOVER_DRIVER, process_alive
from webapp.runs.process import _REAPER

# Leftovers of a driver: one that ends on SIGTERM, and one that ignores it (started and
# ready before the driver exits, as Spark's JVM is).
_POLITE = "import sys,time; print('ready', flush=True); time.sleep(300)"
_DEAF = ("import signal,sys,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
         "print('ready', flush=True); time.sleep(300)")


@pytest.mark.parametrize(("leftover", "within_s"), [(_POLITE, 5.0), (_DEAF, 20.0)])
def test_what_the_driver_left_in_its_group_ends_with_it(tmp_path: Path, leftover: str,
                                                        within_s: float) -> None:
    exit_path, pid_path = tmp_path / "exit.json", tmp_path / "leftover.pid"
    reaper = subprocess.Popen(
        [sys.executable, "-c", _REAPER, str(tmp_path / "driver.log"), str(exit_path),
         sys.executable, "-c", LEFTOVER_DRIVER, str(pid_path), leftover],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        assert reaper.stdout is not None and int(reaper.stdout.readline())
        deadline = time.monotonic() + 30
        while not exit_path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert json.loads(exit_path.read_text())["code"] == 0  # the driver's own exit
        left = int(pid_path.read_text())
        exited = time.monotonic()
        while process_alive(left) and time.monotonic() - exited < within_s:
            time.sleep(0.1)
        assert not process_alive(left), "the driver's leftover outlived it"
        assert reaper.wait(timeout=5) == 0
    finally:
        reaper.kill()
        if pid_path.exists() and process_alive(int(pid_path.read_text())):
            psutil.Process(int(pid_path.read_text())).kill()


# A leftover that notes a SIGTERM and runs on; the driver that started it is killed.
_NOTES_SIGTERM = ("import pathlib,signal,sys,time; signal.signal(signal.SIGTERM, lambda *a: "
                  "pathlib.Path(sys.argv[1]).write_text('SIGTERM')); print('ready', flush=True); "
                  "time.sleep(300)")
_KILLED_DRIVER = ("import os,signal,subprocess,sys; c=subprocess.Popen([sys.executable, '-c', "
                  "sys.argv[3], sys.argv[2]], stdout=subprocess.PIPE, text=True); "
                  "c.stdout.readline(); open(sys.argv[1], 'w').write(str(c.pid)); "
                  "os.kill(os.getpid(), signal.SIGKILL)")


def test_what_a_killed_driver_left_is_killed_without_a_grace(tmp_path: Path) -> None:
    """A JVM without its driver has nothing left to finish: no SIGTERM and 10 s of grace
    before the run's next driver may start, but SIGKILL at once."""
    exit_path, pid_path, noted = tmp_path / "exit.json", tmp_path / "leftover.pid", tmp_path / "n"
    reaper = subprocess.Popen(
        [sys.executable, "-c", _REAPER, str(tmp_path / "driver.log"), str(exit_path),
         sys.executable, "-c", _KILLED_DRIVER, str(pid_path), str(noted), _NOTES_SIGTERM],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        assert reaper.stdout is not None and int(reaper.stdout.readline())
        assert reaper.wait(timeout=60) == 0  # it waits for nothing once the group is gone
        assert json.loads(exit_path.read_text())["code"] == -9
        assert not process_alive(int(pid_path.read_text()))
        assert not noted.exists(), "the leftover was sent SIGTERM first"
    finally:
        reaper.kill()
        if pid_path.exists() and process_alive(int(pid_path.read_text())):
            psutil.Process(int(pid_path.read_text())).kill()
