"""``python -m webapp.launcher``: the run lock, the service commands, child supervision, and the
whole product started and stopped with SIGINT.

Runs without Django settings: ``pytest -p no:django tests/webapp/test_launcher.py``; the launcher
itself runs in a subprocess against the real project.
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import psutil
import psycopg2
import pytest
import redis

from tests.webapp.embedded_var import no_django_fixture, var_dir_fixture  # noqa: F401
from webapp import embedded
from webapp.demo_stream import DEMO_STREAM
from webapp.launcher.children import ChildGroup
from webapp.launcher.run_lock import acquire_run_lock

REPO = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 150


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _launcher_env() -> dict[str, str]:
    """Our environment without the settings that would point the launcher elsewhere."""
    drop = {"DATABASE_URL", "REDIS_URL", "STREAMSCALE_VAR_DIR", "PORT"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def _launcher(var_dir: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "webapp.launcher", "--var-dir", str(var_dir), *args]
    return subprocess.run(
        argv, cwd=REPO, env=_launcher_env(), capture_output=True, text=True, timeout=timeout
    )


def _snapshot(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``folder`` with its size, mtime and mode."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_mode)
        for p in sorted(folder.rglob("*"))
    }


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _lock_is_free(path: Path) -> bool:
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
    return True


# --- the run lock ---------------------------------------------------------------------------


def test_a_second_launcher_is_refused_and_touches_nothing(var_dir: Path) -> None:
    held = acquire_run_lock(var_dir=var_dir, url="http://127.0.0.1:8123/")
    before = _snapshot(var_dir)
    try:
        refused = _launcher(var_dir, "run", "--port", str(_free_port()))
    finally:
        held.release()

    assert refused.returncode == 1
    assert refused.stdout.strip() == (
        f"streamscale is already running (pid {os.getpid()}); stop it first or use its URL "
        "http://127.0.0.1:8123/"
    )
    assert _snapshot(var_dir) == before


def test_a_taken_port_fails_clearly_before_starting_anything(var_dir: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]

        failed = _launcher(var_dir, "run", "--port", str(port))

    assert failed.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in failed.stdout
    assert not (var_dir / "postgres").exists() and not (var_dir / "redis").exists()
    assert _lock_is_free(var_dir / "run.lock")


def test_an_unreachable_configured_database_stops_start_up_naming_it(var_dir: Path) -> None:
    closed = _free_port()
    argv = [sys.executable, "-m", "webapp.launcher", "--var-dir", str(var_dir), "run"]
    env = dict(_launcher_env(), DATABASE_URL=f"postgres://postgres@127.0.0.1:{closed}/x",
               REDIS_URL="redis://127.0.0.1:1/0")
    failed = subprocess.run([*argv, "--port", str(_free_port())], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=60)

    assert failed.returncode == 1
    assert "[launcher] error: DATABASE_URL: cannot reach PostgreSQL: " in failed.stdout
    assert "Traceback" not in failed.stdout + failed.stderr
    assert not (var_dir / "postgres").exists() and not (var_dir / "redis").exists()
    assert _lock_is_free(var_dir / "run.lock")


# --- services / stop-services ---------------------------------------------------------------


def test_services_start_print_urls_and_stop(var_dir: Path) -> None:
    started = _launcher(var_dir, "services")
    assert started.returncode == 0, started.stderr
    urls = dict(line.split("=", 1) for line in started.stdout.split())
    psycopg2.connect(urls["DATABASE_URL"], connect_timeout=5).close()
    assert redis.Redis.from_url(urls["REDIS_URL"]).ping()
    assert urls["NATS_URL"].startswith("nats://") and embedded.nats_running(var_dir=var_dir)

    stopped = _launcher(var_dir, "stop-services")

    assert stopped.returncode == 0, stopped.stderr
    assert not embedded.postgres_running(var_dir=var_dir)
    assert not embedded.redis_running(var_dir=var_dir)
    assert not embedded.nats_running(var_dir=var_dir)


def test_stop_services_refuses_while_a_launcher_runs(var_dir: Path) -> None:
    held = acquire_run_lock(var_dir=var_dir, url="http://127.0.0.1:8123/")
    try:
        refused = _launcher(var_dir, "stop-services")
    finally:
        held.release()

    assert refused.returncode == 1
    assert f"pid {os.getpid()}" in refused.stdout


# --- child supervision ----------------------------------------------------------------------

STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"  # noqa: E501
# A grandchild that leaves the group (own session) must not outlive the launcher either.
ESCAPER = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True); print('up', flush=True); time.sleep(60)"  # noqa: E501


def test_child_group_prefixes_output_and_leaves_no_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    group = ChildGroup(cwd=tmp_path, env=dict(os.environ))
    assert group.run_step("step", [sys.executable, "-c", "print('one'); print('two')"]) == 0
    stubborn = group.start("stubborn", [sys.executable, "-c", STUBBORN])
    escaper = group.start("escaper", [sys.executable, "-c", ESCAPER])
    deadline, said = time.monotonic() + 20, ""
    # Each read takes what was printed since the last one: the two lines may come in two.
    while (said := said + capsys.readouterr().out).count("] up") < 2:
        assert time.monotonic() < deadline, said
        time.sleep(0.1)
    pids = [stubborn.pid, escaper.pid] + [
        p.pid for child in (stubborn, escaper) for p in psutil.Process(child.pid).children(True)
    ]
    assert len(pids) == 3

    group.stop_all(grace_s=1.0)

    assert all(_gone(pid) for pid in pids)
    assert group.first_exited() is None and not group.children


def test_child_group_output_lines_carry_the_prefix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    group = ChildGroup(cwd=tmp_path, env=dict(os.environ))
    group.run_step("step", [sys.executable, "-c", "print('one'); print('two')"])
    assert capsys.readouterr().out.splitlines() == ["[step] one", "[step] two"]


# --- the whole product ----------------------------------------------------------------------


def _read_lines(stream, lines: queue.Queue[str]) -> None:  # noqa: ANN001 - text pipe
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put("")


def _wait_for_line(lines: queue.Queue[str], needle: str, *, seen: list[str]) -> str:
    """The first output line containing ``needle``, already seen or still to come."""
    earlier = [line for line in seen if needle in line]
    if earlier:
        return earlier[0]
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            continue
        seen.append(line)
        if needle in line:
            return line
        if line == "" and lines.empty():
            break
    tail = "\n".join(seen[-40:])
    raise AssertionError(f"launcher never printed {needle!r}; last output:\n{tail}")


def test_run_serves_the_product_and_sigint_stops_everything(var_dir: Path) -> None:
    port = _free_port()
    launcher, lines, seen = _start_launcher(var_dir, port=port)
    try:
        ready = _wait_for_line(lines, "streamscale is running at", seen=seen)
        assert ready == f"streamscale is running at http://127.0.0.1:{port}/  (Ctrl-C to stop)"
        assert _wait_healthy(port)["checks"]["database"]["ok"]
        assert _wait_for_line(lines, " ready.", seen=seen).startswith("[worker]")
        assert _wait_for_line(lines, "beat: Starting", seen=seen).startswith("[beat]")
        _assert_demo_stream_grows(embedded.ensure_redis(var_dir=var_dir))
        pids = [p.pid for p in psutil.Process(launcher.pid).children(recursive=True)]
        pids += [
            _server_pid(var_dir / "postgres/data/postmaster.pid"),
            _server_pid(var_dir / "redis/redis.pid"),
        ]

        launcher.send_signal(signal.SIGINT)
        assert launcher.wait(timeout=45) == 0
    finally:
        _stop(launcher)

    _wait_for_line(lines, "[launcher] stopped", seen=seen)
    assert [pid for pid in pids if not _gone(pid)] == []
    assert _lock_is_free(var_dir / "run.lock")
    assert any(line.startswith("[migrate] ") for line in seen)
    assert any(line.startswith("[web] ") for line in seen)


def _assert_demo_stream_grows(redis_url: str) -> None:
    """The launcher's producer feeds the demo job's stream at its modest rate."""
    client = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + 30
    while client.xlen(DEMO_STREAM) == 0:
        assert time.monotonic() < deadline, "the producer wrote nothing to the demo stream"
        time.sleep(0.2)
    first = client.xlen(DEMO_STREAM)
    time.sleep(2.0)
    assert client.xlen(DEMO_STREAM) > first


def _health(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def _wait_healthy(port: int) -> dict:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        health = _health(port)
        if health and health["status"] == "ok":
            return health
        time.sleep(0.5)
    raise AssertionError(f"/healthz did not report every dependency ok; last: {_health(port)}")


def _start_launcher(
    var_dir: Path, *, port: int, demo: bool = True
) -> tuple[subprocess.Popen[str], queue.Queue[str], list[str]]:
    """The real launcher on ``port``, its output lines arriving in a queue. Without ``demo``
    it starts no demo run and keeps no warm standby: two JVMs a test of the launcher's own
    children does not look at, which would only take the cores from it."""
    argv = [sys.executable, "-m", "webapp.launcher", "--var-dir", str(var_dir), "run"]
    env = _launcher_env()
    if not demo:
        env.update(STREAMSCALE_DEMO="0", WARM_STANDBY="false")
    launcher = subprocess.Popen(
        [*argv, "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_read_lines, args=(launcher.stdout, lines), daemon=True).start()
    return launcher, lines, []


def _stop(launcher: subprocess.Popen[str]) -> None:
    """Whatever the test outcome, let the launcher clean up (SIGINT) before resorting to kill."""
    if launcher.poll() is None:
        launcher.send_signal(signal.SIGINT)
        try:
            launcher.wait(timeout=30)
        except subprocess.TimeoutExpired:
            launcher.kill()


def _server_pid(pid_file: Path) -> int:
    return int(pid_file.read_text().split()[0])


def test_a_launcher_killed_by_sigkill_leaves_nothing_in_the_way_of_the_next(
    var_dir: Path,
) -> None:
    """The next launcher also starts again a child or an embedded Redis that was killed (on
    the same start: each launcher's start is seconds of the cores)."""
    port = _free_port()
    first, lines, seen = _start_launcher(var_dir, port=port, demo=False)
    try:
        _wait_for_line(lines, "streamscale is running at", seen=seen)
        children = psutil.Process(first.pid).children()
        assert {"web", "worker", "beat"} <= {_role(c) for c in children}

        first.kill()
        first.wait(timeout=10)
    finally:
        _stop(first)

    started = time.monotonic()
    second, lines, seen = _start_launcher(var_dir, port=port, demo=False)
    try:
        _wait_for_line(lines, "streamscale is running at", seen=seen)
        assert time.monotonic() - started < 60
        assert [_described(c) for c in children if not _gone(c.pid)] == []
        assert not any("already in use" in line for line in seen)
        assert _wait_healthy(port)["status"] == "ok"
        _a_killed_child_or_embedded_redis_is_started_again(second, lines, seen, var_dir, port)
        servers = [_server_pid(var_dir / "postgres/data/postmaster.pid"),
                   _server_pid(var_dir / "redis/redis.pid"),
                   _server_pid(var_dir / "nats/nats.pid")]

        second.send_signal(signal.SIGINT)
        assert second.wait(timeout=60) == 0
    finally:
        _stop(second)

    # The embedded servers it adopted from the killed launcher are stopped too.
    assert [pid for pid in servers if not _gone(pid)] == []


def _a_killed_child_or_embedded_redis_is_started_again(
    launcher: subprocess.Popen[str], lines: queue.Queue[str], seen: list[str], var_dir: Path,
    port: int,
) -> None:
    worker = next(p for p in psutil.Process(launcher.pid).children() if "worker" in p.cmdline())

    worker.kill()

    assert _wait_for_line(lines, "[launcher] worker exited", seen=seen) == (
        "[launcher] worker exited unexpectedly with code -9 (SIGKILL); restarting it in 1 s")
    _wait_for_line(lines, "[launcher] worker restarted", seen=seen)
    assert set(_wait_healthy(port)["checks"]) == {
        "database", "redis", "celery_worker", "celery_beat"}
    redis_pid = _server_pid(var_dir / "redis/redis.pid")

    os.kill(redis_pid, signal.SIGKILL)

    _wait_for_line(lines, "[launcher] embedded Redis had died; started it again", seen=seen)
    _wait_healthy(port)
    assert _server_pid(var_dir / "redis/redis.pid") != redis_pid
    assert launcher.poll() is None


def _described(process: psutil.Process) -> str:
    """A process as a failure names it: its pid and command line."""
    try:
        return f"{process.pid}: {' '.join(process.cmdline())}"
    except psutil.Error:
        return f"{process.pid}: (gone)"


def _role(process: psutil.Process) -> str:
    cmdline = " ".join(process.cmdline())
    if "uvicorn" in cmdline:  # before "worker": the web server's own flags say --workers
        return "web"
    return next((r for r in ("worker", "beat") if r in cmdline), "other")
