"""The embedded PostgreSQL and Redis: real servers under a temporary var folder.

Runs without Django settings: ``pytest -p no:django tests/webapp/test_embedded.py``.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg2
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.webapp.embedded_var import no_django_fixture, var_dir_fixture  # noqa: F401
from webapp import embedded
from webapp.embedded import redis_server

REPO = Path(__file__).resolve().parents[2]


def _no_retry_client(port: int) -> redis.Redis:
    # redis-py retries an authentication error as a connection error, for seconds.
    return redis.Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0))


def _in_other_process(call: str, var_dir: Path) -> str:
    """Run ``embedded.<call>(var_dir=...)`` in a fresh interpreter that then exits; its result."""
    code = (
        "from pathlib import Path; from webapp import embedded; "
        f"print(embedded.{call}(var_dir=Path({str(var_dir)!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def _postmaster_pid(var_dir: Path) -> int:
    return int((var_dir / "postgres" / "data" / "postmaster.pid").read_text().split()[0])


def _redis_pid(var_dir: Path) -> int:
    return int((var_dir / "redis" / "redis.pid").read_text().split()[0])


def _wait_gone(pid: int) -> None:
    """Wait until ``pid`` exited (a zombie waiting for its reaper counts as exited)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} still running")


def _query(url: str, sql: str) -> object:
    with psycopg2.connect(url, connect_timeout=5) as conn, conn.cursor() as cur:
        cur.execute(sql)
        row = cur.fetchone()
    conn.close()
    return row[0] if row else None


@dataclass(frozen=True)
class _Server:
    """An embedded server as these tests drive it."""

    name: str  # the <name> of embedded.ensure_<name>
    ensure: Callable[..., str]
    stop: Callable[..., None]
    running: Callable[..., bool]
    pid: Callable[[Path], int]  # the running server's, from its pid file
    answers: Callable[[str], bool]  # raises ``unreachable`` when nothing serves the URL
    unreachable: type[Exception]


SERVERS = [
    _Server("postgres", embedded.ensure_postgres, embedded.stop_postgres,
            embedded.postgres_running, _postmaster_pid,
            lambda url: _query(url, "SELECT 1") == 1, psycopg2.OperationalError),
    _Server("redis", embedded.ensure_redis, embedded.stop_redis, embedded.redis_running,
            _redis_pid, lambda url: redis.Redis.from_url(url, socket_connect_timeout=1).ping(),
            redis.ConnectionError),
]


# --- Both servers ---------------------------------------------------------------------------


@pytest.mark.parametrize("server", SERVERS, ids=lambda server: server.name)
def test_a_server_outlives_its_starter_and_is_reused(server: _Server, var_dir: Path) -> None:
    url = _in_other_process(f"ensure_{server.name}", var_dir)  # that process has exited now
    pid = server.pid(var_dir)

    assert server.answers(url)
    assert server.ensure(var_dir=var_dir) == url
    assert server.pid(var_dir) == pid


@pytest.mark.parametrize("server", SERVERS, ids=lambda server: server.name)
def test_stop_stops_a_server_and_is_idempotent(server: _Server, var_dir: Path) -> None:
    url = server.ensure(var_dir=var_dir)
    pid = server.pid(var_dir)

    server.stop(var_dir=var_dir)

    _wait_gone(pid)
    assert not server.running(var_dir=var_dir)
    with pytest.raises(server.unreachable):
        server.answers(url)
    server.stop(var_dir=var_dir)  # nothing to stop: no error


# --- PostgreSQL -----------------------------------------------------------------------------


def test_postgres_starts_and_answers_queries(var_dir: Path) -> None:
    url = embedded.ensure_postgres(var_dir=var_dir)

    match = re.fullmatch(r"postgres://postgres:([0-9a-f]{48})@127\.0\.0\.1:(\d+)/streamscale", url)
    assert match and int(match.group(2)) != 5432  # never the machine's own server
    assert _query(url, "SELECT current_database()") == "streamscale"
    assert _query(url, "SELECT 6 * 7") == 42


def test_postgres_needs_its_generated_password(var_dir: Path) -> None:
    url = embedded.ensure_postgres(var_dir=var_dir)
    password_file = var_dir / "postgres" / "password"
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    assert password_file.read_text().strip() in url
    with pytest.raises(psycopg2.OperationalError, match="password"):
        _query(url.replace(password_file.read_text().strip(), "guess"), "SELECT 1")
    with pytest.raises(psycopg2.OperationalError):
        _query(re.sub(r":[0-9a-f]{48}@", "@", url), "SELECT 1")


def test_a_cluster_made_with_trust_login_gets_its_password(var_dir: Path) -> None:
    url = embedded.ensure_postgres(var_dir=var_dir)
    hba = var_dir / "postgres" / "data" / "pg_hba.conf"
    hba.write_text("host all all 127.0.0.1/32 trust\n")  # as clusters were made before
    _query(url, "SELECT pg_reload_conf()")
    no_password = re.sub(r":[0-9a-f]{48}@", "@", url)
    assert _query(no_password, "SELECT 1") == 1

    assert embedded.ensure_postgres(var_dir=var_dir) == url
    with pytest.raises(psycopg2.OperationalError):
        _query(no_password, "SELECT 1")
    assert _query(url, "SELECT 1") == 1


def test_concurrent_callers_share_one_postgres(var_dir: Path) -> None:
    code = (
        "from pathlib import Path; from webapp import embedded; "
        f"print(embedded.ensure_postgres(var_dir=Path({str(var_dir)!r})))"
    )
    callers = [
        subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    urls = {caller.communicate(timeout=60)[0].strip() for caller in callers}

    assert all(caller.returncode == 0 for caller in callers)
    assert len(urls) == 1
    assert _query(urls.pop(), "SELECT count(*) FROM pg_database WHERE datname='streamscale'") == 1


def test_postgres_restarts_after_a_kill_left_a_stale_pid_file(var_dir: Path) -> None:
    embedded.ensure_postgres(var_dir=var_dir)
    old_pid = _postmaster_pid(var_dir)
    os.kill(old_pid, signal.SIGKILL)
    _wait_gone(old_pid)
    assert (var_dir / "postgres" / "data" / "postmaster.pid").exists()

    url = embedded.ensure_postgres(var_dir=var_dir)

    assert _postmaster_pid(var_dir) != old_pid
    assert _query(url, "SELECT 1") == 1


def test_postgres_failure_names_the_step_and_the_log(var_dir: Path) -> None:
    embedded.ensure_postgres(var_dir=var_dir)
    embedded.stop_postgres(var_dir=var_dir)
    (var_dir / "postgres" / "data" / "PG_VERSION").write_text("9\n")  # a cluster it cannot run

    with pytest.raises(embedded.EmbeddedServiceError) as failure:
        embedded.ensure_postgres(var_dir=var_dir)

    assert isinstance(failure.value, embedded.EmbeddedError)
    assert "embedded postgres: start failed" in str(failure.value)
    assert str(var_dir / "postgres" / "postgres.log") in str(failure.value)


# --- Redis ----------------------------------------------------------------------------------


def test_a_redis_without_a_password_gets_one(var_dir: Path) -> None:
    url = embedded.ensure_redis(var_dir=var_dir)
    redis.Redis.from_url(url).config_set("requirepass", "")  # as servers ran before
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    assert redis.Redis(host="127.0.0.1", port=port).ping()

    assert embedded.ensure_redis(var_dir=var_dir) == url
    with pytest.raises(redis.AuthenticationError):
        _no_retry_client(port).ping()


def test_redis_starts_and_serves_commands(var_dir: Path) -> None:
    url = embedded.ensure_redis(var_dir=var_dir)

    match = re.fullmatch(r"redis://:([0-9a-f]{48})@127\.0\.0\.1:(\d+)/0", url)
    assert match and int(match.group(2)) != 6379  # never the machine's own server
    with pytest.raises(redis.AuthenticationError):
        _no_retry_client(int(match.group(2))).ping()
    assert stat.S_IMODE((var_dir / "redis" / "password").stat().st_mode) == 0o600
    client = redis.Redis.from_url(url)
    assert client.ping()
    client.set("streamscale:test", "value")
    assert client.get("streamscale:test") == b"value"
    client.close()


def test_redis_restarts_on_its_port_after_a_kill_left_a_stale_pid_file(var_dir: Path) -> None:
    url = embedded.ensure_redis(var_dir=var_dir)
    old_pid = _redis_pid(var_dir)
    os.kill(old_pid, signal.SIGKILL)
    _wait_gone(old_pid)
    assert (var_dir / "redis" / "redis.pid").exists()

    assert embedded.ensure_redis(var_dir=var_dir) == url  # the recorded port was free again
    assert _redis_pid(var_dir) != old_pid
    assert redis.Redis.from_url(url).ping()


def test_redis_moves_to_another_port_when_its_port_is_taken(var_dir: Path) -> None:
    url = embedded.ensure_redis(var_dir=var_dir)
    embedded.stop_redis(var_dir=var_dir)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()

        moved = embedded.ensure_redis(var_dir=var_dir)

    assert moved != url
    assert redis.Redis.from_url(moved).ping()


def test_a_redis_in_another_network_namespace_is_named_not_waited_for(var_dir: Path) -> None:
    # Started inside a network namespace of its own, as a bare-machine test run does: its
    # loopback is not this one's, so it can never answer here.
    code = ("from pathlib import Path; from webapp import embedded; "
            f"embedded.ensure_redis(var_dir=Path({str(var_dir)!r}))")
    subprocess.run(["unshare", "-n", "sh", "-c", 'ip link set lo up && "$0" -c "$1"',
                    sys.executable, code], cwd=REPO, check=True, timeout=60)
    pid = _redis_pid(var_dir)
    started = time.monotonic()
    with pytest.raises(embedded.EmbeddedServiceError) as failure:
        embedded.ensure_redis(var_dir=var_dir)
    assert time.monotonic() - started < 5  # not the start-up timeout of a slow server
    assert f"pid {pid} runs in another network namespace" in str(failure.value)
    embedded.stop_redis(var_dir=var_dir)  # signals reach it from here
    _wait_gone(pid)
    assert redis.Redis.from_url(embedded.ensure_redis(var_dir=var_dir)).ping()


def test_redis_failure_names_the_step_and_the_log(
    var_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_server, "_redis_server_binary", lambda: Path("/bin/false"))

    with pytest.raises(embedded.EmbeddedServiceError) as failure:
        embedded.ensure_redis(var_dir=var_dir)

    assert "embedded redis: start failed" in str(failure.value)
    assert str(var_dir / "redis" / "redis.log") in str(failure.value)


def test_server_ports_come_from_outside_the_ephemeral_range(tmp_path: Path) -> None:
    from webapp.embedded.daemons import choose_port

    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    port_file = tmp_path / "port"
    port = choose_port(port_file)
    assert port < ephemeral_low
    assert int(port_file.read_text()) == port
    assert choose_port(port_file) == port  # free again: kept

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        moved = choose_port(port_file)
    assert moved != port and moved < ephemeral_low
    assert int(port_file.read_text()) == moved
