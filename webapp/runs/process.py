"""Driver processes: started detached from the Celery worker that launches them, and checked
for life without trusting a pid that may have been reused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from webapp.runs.exits import EXIT_FILE

DRIVER_MODULE = "webapp.runs.driver"
STANDBY_ARG = "standby"  # ``python -m webapp.runs.driver standby TOKEN``: see webapp.runs.standby

# A short-lived middle process starts the reaper in its own session and exits at once, so the
# reaper is re-parented away from the worker (no zombie left behind, and it survives the task).
_SPAWN = (
    "import subprocess, sys\n"
    "p = subprocess.Popen([sys.executable, '-c', *sys.argv[1:]], stdin=subprocess.DEVNULL,"
    " stdout=subprocess.PIPE, stderr=open(sys.argv[2], 'ab'), start_new_session=True,"
    " close_fds=True)\n"
    "print(p.stdout.readline().decode().strip(), flush=True)\n"
)

# The reaper (stdlib only: it lives as long as the driver) starts the driver in a session of
# its own, prints its pid, waits for it and records its exit status (negative: the signal),
# and when, so the watcher can tell a clean suspend from a crash, name what ended the driver
# and time its restart's back-off from the crash. A warm standby learns its run after it
# started: the path in ``<exit file>.to``, when there is one, is where its exit is recorded.
# Its command line does not hold the driver module: only the driver matches `driver_alive`.
# Then it ends what the driver left in its process group: Spark's JVM outlives a driver
# killed while the JVM was starting (it never reached its watch on the driver's pipe), and
# it winds down for seconds after a driver killed later. After a driver that ended of itself
# it gets SIGTERM, so its shutdown hooks run, and SIGKILL after 10 s; after a driver killed
# by a signal, SIGKILL at once: no successor starts while the group lives, and a JVM
# without its driver has nothing left to finish (its temporary files are in the run's
# folder, SPARK_LOCAL_DIRS, which the next launch clears).
_REAPER = (
    "import json, os, signal, subprocess, sys\n"
    "log_path, exit_path, argv = sys.argv[1], sys.argv[2], sys.argv[3:]\n"
    "argv[2] = argv[2].replace(':', '.')\n"
    "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP): signal.signal(s, signal.SIG_IGN)\n"
    "def default(): [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGINT, signal.SIGTERM,"
    " signal.SIGHUP)]\n"
    "with open(log_path, 'ab') as log:\n"
    "    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,"
    " stderr=subprocess.STDOUT, start_new_session=True, close_fds=True, preexec_fn=default)\n"
    "print(p.pid, flush=True)\n"
    "os.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n"
    "code = p.wait()\n"
    "import time\n"
    "try:\n"
    "    exit_path = open(exit_path + '.to').read().strip() or exit_path\n"
    "except OSError:\n"
    "    pass\n"
    "tmp = exit_path + '.tmp'\n"
    "open(tmp, 'w').write(json.dumps({'pid': p.pid, 'code': code, 'at': time.time()}))\n"
    "os.replace(tmp, exit_path)\n"
    "ends = ((signal.SIGTERM, 10.0),) if code >= 0 else ()\n"
    "for sig, wait in (*ends, (signal.SIGKILL, 0.0)):\n"
    "    try:\n"
    "        os.killpg(p.pid, sig)\n"
    "    except ProcessLookupError:\n"
    "        break\n"
    "    end = time.monotonic() + wait\n"
    "    while time.monotonic() < end:\n"
    "        try:\n"
    "            os.killpg(p.pid, 0)\n"
    "        except ProcessLookupError:\n"
    "            sys.exit(0)\n"
    "        time.sleep(0.1)\n"
)


def driver_spawn(*, args: list[str], log_path: Path, cwd: Path, env: dict[str, str]) -> int:
    """Start a driver process, ``python -m webapp.runs.driver ARGS`` (a run's id, or
    ``standby TOKEN``), watched by its reaper; its pid."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # The module's dots are colons on the reaper's command line (see _REAPER).
    argv = [sys.executable, "-m", DRIVER_MODULE.replace(".", ":"), *args]
    exit_path = log_path.parent / EXIT_FILE
    middle = subprocess.run(
        [sys.executable, "-c", _SPAWN, _REAPER, str(log_path), str(exit_path), *argv],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=True,
    )
    return int(middle.stdout.strip())


def driver_alive(pid: int | None, run_id: int) -> bool:
    """Whether `pid` is this run's driver and still running (not a zombie, not a reused pid)."""
    if not pid:
        return False
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        cmdline = process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    if DRIVER_MODULE not in cmdline:
        return False
    if STANDBY_ARG in cmdline:  # a warm standby drives the run it was handed, if any
        from webapp.runs.standby import standby_run

        token = cmdline[cmdline.index(STANDBY_ARG) + 1:][:1]
        return bool(token) and standby_run(token[0]) == run_id
    return str(run_id) in cmdline


def driver_signal(
    pid: int | None, run_id: int, sig: int = signal.SIGTERM, *, whole_group: bool = True
) -> bool:
    """Signal the driver's whole process group (Spark's JVM included), or with
    ``whole_group=False`` the driver alone, so that it can still stop its query cleanly
    (its JVM exits with it); False if the driver is gone."""
    if not driver_alive(pid, run_id):
        return False
    assert pid is not None
    try:
        if whole_group:
            os.killpg(os.getpgid(pid), sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def group_leftovers(pgid: int | None, *, born_before: float) -> list[psutil.Process]:
    """What is still alive of an ended driver's process group ``pgid`` (its JVM, Python
    workers, the streaming source's runner): the group's processes born before
    ``born_before`` (epoch seconds, the driver's end), so a later process that happens to
    take the group's number is never counted, nor killed, as one of them."""
    if not pgid:
        return []
    left = []
    for process in psutil.process_iter(["create_time", "status"]):
        try:
            if (os.getpgid(process.pid) == pgid and process.info["create_time"] <= born_before
                    and process.info["status"] != psutil.STATUS_ZOMBIE):
                left.append(process)
        except (ProcessLookupError, psutil.Error):
            continue
    return left


def log_tail(path: Path, *, lines: int = 15) -> str:
    """The last lines of a driver log, for a failed run's cause."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])
