"""The real stack for browser tests, and headless Chromium pages signed in by role.

One stack per session: the launcher (`python -m webapp.launcher run`) with its web server,
Celery worker and beat, on private PostgreSQL and Redis servers in a temporary folder, so the
tests neither need nor touch anything configured on the machine. Every page collects console
errors and failed page scripts; a test fails if there are any.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from webapp.launcher.health import answers_health

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PASSWORD = "pw-browser-123"
ROLES = ("viewer", "editor", "operator", "admin")
START_TIMEOUT_S = 150
FIRST_EPOCH_TIMEOUT_MS = 180_000  # Spark's start on a busy 2-core machine


@dataclass
class Stack:
    url: str
    env: dict[str, str]
    var_dir: Path
    children: list[subprocess.Popen] = field(default_factory=list)
    _shell: subprocess.Popen | None = None
    _shell_log: Any = None

    def manage(self, *args: str, env: dict[str, str] | None = None) -> str:
        """Run a manage.py command against the stack's database, with ``env`` added to the
        stack's environment; its output."""
        return self._python([str(REPO / "manage.py"), *args], env=env)

    def shell(self, code: str) -> str:
        """Run ``code`` in the stack's Django (see shell.py); what it printed."""
        if self._shell is None or self._shell.poll() is not None:
            self._shell = subprocess.Popen(
                [sys.executable, "-m", "tests.browser.shell"], cwd=REPO, env=self.env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._shell_log,
                text=True)
            self.children.append(self._shell)
        assert self._shell.stdin is not None and self._shell.stdout is not None
        self._shell.stdin.write(json.dumps({"code": code}) + "\n")
        self._shell.stdin.flush()
        line = self._shell.stdout.readline()
        if not line:
            raise RuntimeError(f"the stack's shell exited; see {self._shell_log.name}")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{code}\nfailed:\n{reply['out']}\n{reply['error']}")
        return reply["out"]

    def fake_run(self, *args: str) -> str:
        """``python -m tests.browser.fake_run ARGS``, run in the stack's shell."""
        return self.shell(f"from tests.browser.fake_run import main\nmain({list(args)!r})")

    def start(self, *args: str) -> subprocess.Popen:
        """A background Python process in the stack's environment, stopped at the end."""
        child = subprocess.Popen([sys.executable, *args], cwd=REPO, env=self.env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.children.append(child)
        return child

    def _python(self, args: list[str], env: dict[str, str] | None = None) -> str:
        done = subprocess.run([sys.executable, *args], cwd=REPO, env={**self.env, **(env or {})},
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"{args} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _launcher_env(var_dir: Path) -> dict[str, str]:
    drop = {"DATABASE_URL", "REDIS_URL", "STREAMSCALE_VAR_DIR", "PORT", "DJANGO_SETTINGS_MODULE"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(STREAMSCALE_VAR_DIR=str(var_dir), PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1",
               # Runs fed an hour of history keep all of it while a test looks at them.
               METRICS_FULL_RESOLUTION_S="7200",
               # No demo run: the tests start their own, and the demo's Spark run and event
               # producer would take CPU from every test that follows in the session.
               STREAMSCALE_DEMO="0")
    return env


def _service_urls(var_dir: Path, env: dict[str, str]) -> dict[str, str]:
    done = subprocess.run([sys.executable, "-m", "webapp.launcher", "--var-dir", str(var_dir),
                           "services"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=START_TIMEOUT_S, check=True)
    return dict(line.split("=", 1) for line in done.stdout.split() if "=" in line)


def _stop_drivers(var_dir: Path) -> None:
    """Run drivers live in processes of their own; stop those this stack started."""
    import psutil

    mine = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if "webapp.runs.driver" in " ".join(process.info["cmdline"] or []) and \
                    process.environ().get("STREAMSCALE_VAR_DIR") == str(var_dir):
                mine.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    for process in mine:
        process.terminate()
    _, alive = psutil.wait_procs(mine, timeout=20)
    for process in alive:
        process.kill()


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    # Not under pytest's tmp_path: the database server may run as another user.
    var_dir = Path(tempfile.mkdtemp(prefix="streamscale-browser-")) / "var"
    env = _launcher_env(var_dir)
    env.update(_service_urls(var_dir, env))
    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    log = open(var_dir.parent / "stack.log", "w")  # noqa: SIM115 - closed at teardown
    launcher = subprocess.Popen(
        [sys.executable, "-m", "webapp.launcher", "--var-dir", str(var_dir), "run", "--port",
         str(port)], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    stack = Stack(url=url, env=dict(env, DJANGO_SETTINGS_MODULE="webapp.settings"),
                  var_dir=var_dir, _shell_log=log)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not answers_health(url):
            if launcher.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the stack did not start; see {log.name}")
            time.sleep(0.5)
        for role in ROLES:
            stack.manage("create_user", f"{role}-b", "--role", role,
                         env={"STREAMSCALE_USER_PASSWORD": PASSWORD})
        yield stack
    finally:
        for child in stack.children:
            child.terminate()
        launcher.send_signal(signal.SIGINT)
        try:
            launcher.wait(timeout=60)
        except subprocess.TimeoutExpired:
            launcher.kill()
        _stop_drivers(var_dir)
        subprocess.run([sys.executable, "-m", "webapp.launcher", "--var-dir", str(var_dir),
                        "stop-services"], cwd=REPO, env=env, capture_output=True, timeout=60)
        log.close()
        shutil.rmtree(var_dir.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def fed_run(stack) -> Iterator[Callable[..., tuple[int, int]]]:
    """`fed_run(name, history, feed=True)`: `(run_id, job_id)` of a fake run with `history`
    epochs (see fake_run.py), fed an epoch a second until the test ends (unless not ``feed``)."""
    feeders: list[subprocess.Popen] = []

    def create(name: str, history: int, *, feed: bool = True) -> tuple[int, int]:
        run_id, job_id = stack.fake_run("create", str(history), name).split()
        if feed:
            feeders.append(stack.start("-m", "tests.browser.fake_run", "feed", run_id))
        return int(run_id), int(job_id)

    yield create
    for feeder in feeders:
        feeder.terminate()


@pytest.fixture
def signed_in(stack, browser) -> Iterator[Callable]:
    """`signed_in(role)`: a 1280x900 page signed in as that role's user. Console errors and
    page errors fail the test."""
    contexts, errors = [], []

    def open_page(role: str, *, width: int = 1280, height: int = 900,
                  expected_errors: tuple[str, ...] = ()):
        """``expected_errors``: console messages a test provokes on purpose (the browser logs
        each refused request, e.g. "status of 409"), matched by substring."""
        # The pages' Content-Security-Policy forbids eval, which Playwright's wait_for_function
        # uses for its predicates; the policy itself is checked in tests/webapp/test_security.py.
        context = browser.new_context(viewport={"width": width, "height": height},
                                      base_url=stack.url.rstrip("/"), accept_downloads=True,
                                      bypass_csp=True)
        contexts.append(context)
        page = context.new_page()
        page.on("console", lambda m: m.type == "error" and not any(
            e in m.text for e in expected_errors) and errors.append(f"{role}: {m.text}"))
        page.on("pageerror", lambda e: errors.append(f"{role}: page error {e}"))
        page.goto("/login/")
        page.fill("#id_username", f"{role}-b")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(stack.url)
        return page

    yield open_page
    for context in contexts:
        context.close()
    assert errors == [], "console errors:\n" + "\n".join(errors)


@pytest.fixture
def fed_run_opened(fed_run, signed_in) -> Callable[..., tuple[Any, int, int]]:
    """`fed_run_opened(name, history, role="operator")`: `(page, run_id, job_id)`, the page
    signed in as ``role`` showing a new fed run's page (see ``fed_run``)."""

    def open_run(name: str, history: int, role: str = "operator") -> tuple[Any, int, int]:
        run_id, job_id = fed_run(name, history)
        page = signed_in(role)
        run_page_open(page, run_id)
        return page, run_id, job_id

    return open_run


def wait_live(page) -> None:
    """Until the page's websocket is connected (its state label says "live")."""
    page.wait_for_function("document.querySelector('#live-state').textContent === 'live'")


def wait_running(page, stack: Stack, run_id: int) -> None:
    """Until the page shows the run running; on a timeout, fail with the driver's log."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function("document.querySelector('#run-status').textContent === 'running'",
                               timeout=FIRST_EPOCH_TIMEOUT_MS)
    except PlaywrightTimeout:
        log = stack.var_dir / "runs" / str(run_id) / "driver.log"
        tail = log.read_text()[-3000:] if log.exists() else "(no driver log)"
        status = page.inner_text("#run-status")
        pytest.fail(f"run {run_id} is {status!r}, not running, after "
                    f"{FIRST_EPOCH_TIMEOUT_MS // 1000} s; end of {log}:\n{tail}")


def htmx_settled(page) -> None:
    """Until htmx has settled its last swap. Swapped-in content is in the page before htmx
    binds its triggers (its settle step, 20 ms later), and a change made inside that gap
    sends nothing; a person is never that quick, a test is."""
    page.wait_for_function(
        "!document.querySelector('.htmx-added, .htmx-settling, .htmx-request, .htmx-swapping')")


def run_page_open(page, run_id: int) -> None:
    """Open a run's page and wait until its live updates are connected and their snapshot
    shown."""
    page.goto(f"/runs/{run_id}/")
    wait_live(page)
    # Its controls are offered from the snapshot on (none before the first epoch).
    page.wait_for_selector("body[data-snapshot]", state="attached")


def api(page, method: str, path: str, body: dict) -> dict:
    """A JSON API request from the page, as the signed-in user: `{"status", "body"}`."""
    return page.evaluate(
        """async ([method, path, body]) => {
             const csrf = JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRFToken"];
             const r = await fetch(path, {method, body: JSON.stringify(body),
               headers: {"Content-Type": "application/json", "X-CSRFToken": csrf}});
             return {status: r.status, body: await r.json()};
           }""", [method, path, body])


def reconfigure(page, run_id: int, **change: Any) -> dict:
    """Request ``change`` of the run through the API as the signed-in user; it must be
    accepted. The answer's body."""
    answer = api(page, "POST", f"/api/runs/{run_id}/reconfigurations", change)
    assert answer["status"] == 202, answer
    return answer["body"]


def history_entry(page, action: str):
    """The row of the History page's entry of ``action`` (e.g. "reconfiguration.rescale")."""
    return page.locator("#history-rows tr[data-action]").filter(
        has=page.locator(f"code:text-is('{action}')"))


def screenshot(page, name: str, *, full_page: bool = True) -> None:
    """Saved only when SCREENSHOT_DIR is set (how the README's screenshots are made). ``page``
    may be a locator: then only its element is taken."""
    folder = os.environ.get("SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        path = str(Path(folder) / f"{name}.png")
        if hasattr(page, "goto"):
            page.screenshot(path=path, full_page=full_page)
        else:
            page.screenshot(path=path)
