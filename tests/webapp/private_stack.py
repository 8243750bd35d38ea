"""A private, throw-away instance of the whole product, for end-to-end tests and benchmarks
(a test harness: the product itself never starts one).

`PrivateStack` runs `python -m webapp.launcher run` on a free port with its own embedded
PostgreSQL and Redis in a temporary folder, so it neither needs nor touches anything configured
on the machine, and offers a token-authenticated JSON client for it.
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
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.waiting import wait_for  # noqa: F401  # the stack tests wait with it
from webapp.config import BASE_DIR
from webapp.launcher.health import answers_health

START_TIMEOUT_S = 180.0
_DROPPED = ("DATABASE_URL", "REDIS_URL", "STREAMSCALE_VAR_DIR", "PORT", "DJANGO_SETTINGS_MODULE",
            "PGAPPNAME")


class StackError(Exception):
    """The private stack did not start, or an API call failed; the message says which."""


class PrivateStack:
    """Start with `start()`, stop with `stop()` (or use it as a context manager)."""

    def __init__(self, *, demo: bool = True, standby: bool = True) -> None:
        """``demo``: whether the stack starts the demo job's run and its event producer;
        ``standby``: whether it keeps a warm standby driver (a JVM of its own)."""
        self.var_dir = Path(tempfile.mkdtemp(prefix="streamscale-stack-"))
        os.chmod(self.var_dir, 0o755)  # the embedded PostgreSQL runs as its own system user
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
        self.env.update(STREAMSCALE_VAR_DIR=str(self.var_dir), PYTHONUNBUFFERED="1",
                        STREAMSCALE_DEMO="1" if demo else "0",
                        WARM_STANDBY="true" if standby else "false")
        self.log_path = self.var_dir / "launcher.log"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> PrivateStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> PrivateStack:
        log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the child's lifetime
        self.process = subprocess.Popen(
            [sys.executable, "-m", "webapp.launcher", "--var-dir", str(self.var_dir), "run",
             "--port", str(self.port)],
            cwd=BASE_DIR, env=self.env, stdout=log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not answers_health(f"{self.url}/"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise StackError(f"the stack did not start; log:\n{self.log_tail()}")
            time.sleep(0.5)
        return self

    def stop(self) -> None:
        """Stop the launcher (it suspends drivers and stops its servers), then clean up."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.var_dir, ignore_errors=True)

    def manage(self, *args: str, env: dict[str, str] | None = None) -> str:
        """Run a manage.py command against this stack's database, with ``env`` added to the
        stack's environment, and return its output."""
        done = subprocess.run([sys.executable, str(BASE_DIR / "manage.py"), *args], cwd=BASE_DIR,
                              env={**self.env, **(env or {})}, capture_output=True, text=True,
                              timeout=300)
        if done.returncode != 0:
            raise StackError(f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def client(self, *, username: str, role: str) -> ApiClient:
        """A JSON API client for a new user with `role`."""
        token = self.manage("create_user", username, "--role", role, "--token").split()[-1]
        return ApiClient(self.url, token)

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        """The rows of one SQL statement on this stack's own (embedded) database."""
        import psycopg2

        folder = self.var_dir / "postgres"
        conn = psycopg2.connect(host="127.0.0.1", port=(folder / "port").read_text().strip(),
                                user="postgres", dbname="streamscale",
                                password=(folder / "password").read_text().strip())
        try:
            with conn.cursor() as cursor:
                cursor.execute(sql, params)
                return cursor.fetchall()
        finally:
            conn.close()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class ApiClient:
    """Bearer-token JSON calls; `call` returns (status, body) and never raises on 4xx."""

    def __init__(self, base: str, token: str) -> None:
        self.base, self.token = base, token

    def get(self, path: str) -> Any:
        return self._ok(*self.call("GET", path))

    def post(self, path: str, body: Any, *, timeout: float = 60.0) -> Any:
        return self._ok(*self.call("POST", path, body, timeout=timeout))

    def call(self, method: str, path: str, body: Any = None, *,
             timeout: float = 60.0) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.base + path, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    @staticmethod
    def _ok(status: int, body: Any) -> Any:
        if status >= 400:
            raise StackError(f"API answered {status}: {body}")
        return body


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LiveFeed:
    """A websocket client of the run's live channel, collecting every message in a thread."""

    def __init__(self, stack: PrivateStack, token: str, run_id: int) -> None:
        from websockets.sync.client import connect

        self.messages: list[dict] = []
        self.socket = connect(f"ws://127.0.0.1:{stack.port}/ws/runs/{run_id}/",
                              additional_headers={"Authorization": f"Bearer {token}",
                                                  "Origin": stack.url})
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for raw in self.socket:
                self.messages.append(json.loads(raw))
        except Exception:  # noqa: BLE001 - the socket closes when the test ends
            return

    def of_type(self, kind: str) -> list[dict]:
        return [m for m in list(self.messages) if m.get("type") == kind]

    def close(self) -> None:
        self.socket.close()
