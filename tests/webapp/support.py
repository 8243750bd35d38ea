"""Helpers shared by the web application's tests (fixtures live in conftest.py)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from pathlib import Path

import psutil
from django.conf import settings

from webapp.config import database_url_of

ROOT = Path(__file__).resolve().parents[2]


def database_url_for_children() -> str:
    """A URL for the test database pytest-django created, for processes the tests start."""
    return database_url_of(settings.DATABASES["default"])


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url_for_children(),
        REDIS_URL=settings.REDIS_URL,
        DJANGO_SETTINGS_MODULE="webapp.settings",
        PYTHONPATH=str(ROOT),
        WARM_STANDBY="0",  # as in the tests' own process (see conftest.no_warm_standby)
    )
    return env


def run_alone(coroutine):  # type: ignore[no-untyped-def]
    """``asyncio.run`` on a thread of its own: a browser test's Playwright session keeps an
    event loop running in the main thread for the rest of the suite."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


# A stand-in driver for tests of what a driver leaves behind (no colon: the reaper turns a
# module name's colons into dots): it starts the leftover given as its second argument in its
# own process group, writes the leftover's pid to its first argument and exits.
LEFTOVER_DRIVER = ("import subprocess,sys; c=subprocess.Popen([sys.executable, '-c', sys.argv[2]], "
                   "stdout=subprocess.PIPE, text=True); c.stdout.readline(); "
                   "open(sys.argv[1], 'w').write(str(c.pid))")


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
