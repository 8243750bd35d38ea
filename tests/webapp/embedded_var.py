"""Fixtures of the tests that start embedded servers themselves, without Django: import them
into the test module (`from tests.webapp.embedded_var import no_django_fixture,
var_dir_fixture`) to get ``var_dir`` and no Django."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from webapp import embedded


@pytest.fixture(autouse=True, name="fast_password_hashing")
def no_django_fixture() -> None:
    """Replaces the package-wide autouse fixture that needs Django settings: these tests use
    none, so that they also run with ``-p no:django``."""


@pytest.fixture(name="var_dir")
def var_dir_fixture() -> Iterator[Path]:
    """A private var folder; whatever the test started there is stopped, then it is removed.

    Not under pytest's tmp_path: when run as root the database server runs as another user,
    and a concurrent pytest session resets its base folder to mode 0700 under our feet.
    """
    folder = Path(tempfile.mkdtemp(prefix="streamscale-test-")) / "var"
    yield folder
    embedded.stop_postgres(var_dir=folder)
    embedded.stop_redis(var_dir=folder)
    embedded.stop_nats(var_dir=folder)
    for process in psutil.process_iter(["cmdline"]):
        if str(folder) in " ".join(process.info["cmdline"] or []):
            process.kill()
    shutil.rmtree(folder.parent, ignore_errors=True)
