"""The warm standby driver: a driver process started before it is needed, its imports, JVM
and SparkSession already up, that the next start or restart of a run on this host takes over
instead of starting a driver from nothing.

A JVM and a SparkSession take seconds to start, most of a restart's time; with a standby, a
restart waits only for the query to resume from its checkpoint. One free standby is kept per
host while ``WARM_STANDBY`` is on and the master is local. On a standalone cluster its idle
application holds executors, cores the cluster must spare, so it is kept there only with
``WARM_STANDBY_CLUSTER``; a restart then also skips the launch of its executors. None is
started while a run of the host is starting or recovering: it would take the cores that run's
start needs.

A standby lives in ``var/standby/TOKEN``:

- ``pid``: its process (``python -m webapp.runs.driver standby TOKEN``, under its reaper);
- ``env``: a digest of the environment and master it started with: only a launch with the
  same ones takes it, and a standby of another one is stopped;
- ``free``: there until a launch takes it. Taking it is renaming it, which one launch alone
  can do, whether or not the standby's session is up yet;
- ``run``: the run it was given, written by the launch that took it, which the standby waits
  for and ``driver_alive`` reads;
- ``driver-exit.json.to``: where its reaper records its exit: the folder of that run.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import time
import uuid
from pathlib import Path

import psutil
from django.conf import settings

from webapp.config import BASE_DIR
from webapp.runs.exits import EXIT_FILE, write_whole
from webapp.runs.process import DRIVER_MODULE, STANDBY_ARG, driver_spawn, group_leftovers

STANDBY_DIR = "standby"
# A standby that died before any launch took it (its JVM could not start, say) is not
# replaced sooner than this: each attempt costs a JVM's start.
FAILED_PAUSE_S = 300.0
WAIT_POLL_S = 0.02


def _root() -> Path:
    return Path(settings.VAR_DIR) / STANDBY_DIR


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def env_digest(env: dict[str, str], master: str) -> str:
    """What a standby must share with a run's driver to drive it: its environment (but for
    its Spark temporary folder, its own) and the master."""
    kept = {k: v for k, v in env.items() if k != "SPARK_LOCAL_DIRS"}
    return hashlib.sha256(json.dumps([sorted(kept.items()), master]).encode()).hexdigest()


def standby_run(token: str) -> int | None:
    """The run the standby ``token`` was given, if any."""
    text = _read(_root() / token / "run")
    return int(text) if text and text.isdigit() else None


def _process(folder: Path) -> psutil.Process | None:
    """The standby of ``folder`` if it is alive (its pid, checked against its command line)."""
    text = _read(folder / "pid")
    if not text or not text.isdigit():
        return None
    try:
        process = psutil.Process(int(text))
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        cmdline = process.cmdline()
    except psutil.Error:
        return None
    return process if DRIVER_MODULE in cmdline and folder.name in cmdline else None


def _folders() -> list[Path]:
    root = _root()
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def standby_take(*, run_id: int, env: dict[str, str], master: str) -> int | None:
    """Give run ``run_id`` to a free standby of this environment and master; its pid, or
    None when there is none. The caller records the pid as the run's driver."""
    digest = env_digest(env, master)
    for folder in _folders():
        if _read(folder / "env") != digest or _process(folder) is None:
            continue
        try:
            (folder / "free").rename(folder / "taken")
        except FileNotFoundError:
            continue  # another launch took it first
        write_whole(folder / f"{EXIT_FILE}.to", str(_run_folder(run_id) / EXIT_FILE))
        write_whole(folder / "run", str(run_id))
        return int(_read(folder / "pid") or 0) or None
    return None


def _run_folder(run_id: int) -> Path:
    from webapp.runs.services import run_dir

    return run_dir(run_id)


def standby_keep(*, env: dict[str, str], master: str, starting: bool) -> str | None:
    """One pass of the host's standby upkeep: clear the folders of ended standbys, stop free
    ones of another environment, and start one when none is free (unless ``starting``: a run
    is starting or recovering). What it did, if anything. Watch passes may overlap (a slow
    one and the next): a pass that finds another one keeping the standby leaves it to it, so
    that two never start a standby each."""
    _root().mkdir(parents=True, exist_ok=True)
    with open(_root() / ".lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        return _keep(env, master, starting)


def _keep(env: dict[str, str], master: str, starting: bool) -> str | None:
    digest = env_digest(env, master)
    free = []
    for folder in _folders():
        process = _process(folder)
        if process is None and _being_started(folder):
            free.append(folder)
        elif process is None:
            _clear(folder)
        elif (folder / "free").exists():
            if _read(folder / "env") == digest:
                free.append(folder)
            else:
                _stop(folder, process)
    if free or starting or not _wanted(master):
        return None
    failed = _read(_root() / "failed_at")
    if failed and time.time() - float(failed) < FAILED_PAUSE_S:
        return None
    return f"standby driver {_spawn(env, digest)} started"


def _wanted(master: str) -> bool:
    return settings.WARM_STANDBY and (master.startswith("local") or settings.WARM_STANDBY_CLUSTER)


def _spawn(env: dict[str, str], digest: str) -> int:
    token = uuid.uuid4().hex
    folder = _root() / token
    folder.mkdir(parents=True)
    write_whole(folder / "env", digest)
    (folder / "free").touch()
    pid = driver_spawn(args=[STANDBY_ARG, token], log_path=folder / "driver.log", cwd=BASE_DIR,
                       env={**env, "SPARK_LOCAL_DIRS": str(folder / "spark-local")})
    write_whole(folder / "pid", str(pid))
    return pid


def _being_started(folder: Path) -> bool:
    """Its pid is written once its reaper answers, a moment after the folder is made."""
    try:
        return not (folder / "pid").exists() and time.time() - folder.stat().st_mtime < 60
    except OSError:
        return False


def _clear(folder: Path) -> None:
    """Remove the folder of an ended standby once nothing of its process group is left; one
    that died free is remembered, so that a standby that cannot start is not started again
    and again."""
    pid = _read(folder / "pid")
    if pid is not None and group_leftovers(int(pid), born_before=time.time()):
        return
    if (folder / "free").exists() and pid is not None:
        write_whole(_root() / "failed_at", str(time.time()))
    shutil.rmtree(folder, ignore_errors=True)


def _stop(folder: Path, process: psutil.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    (folder / "free").unlink(missing_ok=True)


def standbys_stop() -> list[int]:
    """Stop this host's free standbys (the product is shutting down); their pids. A standby a
    run took is that run's driver, suspended as drivers are."""
    stopped = []
    for folder in _folders():
        process = _process(folder)
        if process is not None and (folder / "free").exists():
            _stop(folder, process)
            stopped.append(process.pid)
    return stopped


def standby_wait(token: str) -> int | None:
    """In the standby: wait until a launch gives it a run; that run's id, or None once its
    folder is gone (the product's var folder was removed): nobody can give it one."""
    folder = _root() / token
    while (run_id := standby_run(token)) is None:
        if not folder.is_dir():
            return None
        time.sleep(WAIT_POLL_S)
    return run_id
