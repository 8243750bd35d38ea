"""SIGTERM on a run's driver: at once before its query runs, cleanly at the next check after."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# A stand-in driver: the real handler, then a long blocking wait like Spark's start-up, or
# (with "running") the loop that polls the stop event as run_driver does.
_DRIVER = """
import sys, threading, time
from webapp.runs.driver import _on_sigterm
import signal
stop, running = threading.Event(), threading.Event()
signal.signal(signal.SIGTERM, _on_sigterm(stop, running))
if sys.argv[1] == "running":
    running.set()
print("ready", flush=True)
if sys.argv[1] == "running":
    while not stop.wait(0.05):
        pass
    print("suspended cleanly", flush=True)
    sys.exit(3)
time.sleep(60)
print("start-up finished", flush=True)
"""


def _start(mode: str) -> subprocess.Popen[str]:
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, mode], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert driver.stdout is not None and driver.stdout.readline().strip() == "ready"
    return driver


def test_sigterm_during_start_up_exits_at_once() -> None:
    driver = _start("starting")
    began = time.monotonic()
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(timeout=10) == 0
    assert time.monotonic() - began < 5
    assert driver.stdout is not None and "start-up finished" not in driver.stdout.read()


def test_sigterm_while_running_only_asks_the_loop_to_stop() -> None:
    driver = _start("running")
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(timeout=10) == 3
    assert driver.stdout is not None and driver.stdout.read().strip() == "suspended cleanly"
