"""The embedded PostgreSQL: pgserver's ``initdb`` and ``pg_ctl``, a daemon on loopback TCP."""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import psycopg2
import psycopg2.sql

from webapp.embedded.credentials import stored_password
from webapp.embedded.daemons import (
    LOOPBACK,
    START_TIMEOUT_S,
    EmbeddedError,
    EmbeddedServiceError,
    InFolder,
    ServiceFolder,
    choose_port,
    live_process,
    refuse_other_network,
    stop_server,
    terminate,
)

DATABASE_NAME = "streamscale"
POSTGRES_USER = "postgres"
# Chosen, not inherited: the web server holds at most WEB_WORKERS x (WEB_THREADS + 1)
# connections (5 by default, see webapp.bounded), the Celery worker and beat about 4, each
# run's driver 1 and its Postgres sink 1 while it commits an epoch, tests and manage.py commands
# a few. 100 leaves room for dozens of runs, and no burst of web requests can reach it.
MAX_CONNECTIONS = 100
# PostgreSQL refuses to run as root; when we are root the server runs as this system user,
# the same one pgserver itself uses.
POSTGRES_SYSTEM_USER = "pgserver"


class _PostgresFiles(ServiceFolder, service="postgres", executable="postgres"):
    data = InFolder("data")


def _pg_bin(name: str) -> str:
    """Path of a PostgreSQL program shipped in the pgserver wheel.

    Found without importing ``pgserver``: its import creates runtime folders and warns.
    """
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedError("the pgserver package is not installed")
    return str(Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin" / name)


def _pg_run_as() -> dict[str, Any]:
    """subprocess arguments that drop root to the server's system user (no-op otherwise)."""
    if os.geteuid() != 0:
        return {}
    try:
        entry = pwd.getpwnam(POSTGRES_SYSTEM_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                POSTGRES_SYSTEM_USER,
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
        entry = pwd.getpwnam(POSTGRES_SYSTEM_USER)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _pg_prepare_dirs(files: _PostgresFiles, run_as: dict[str, Any]) -> None:
    """Create the folders; as root, hand them to the server user and let it reach them."""
    files.root.mkdir(parents=True, exist_ok=True)
    files.data.mkdir(mode=0o700, exist_ok=True)
    if not run_as:
        return
    _allow_traversal(files.root.parent)  # the server user must reach its folder from /
    for path in (files.root, files.data):
        os.chown(path, run_as["user"], run_as["group"])
    if files.log.exists():
        os.chown(files.log, run_as["user"], run_as["group"])


def _allow_traversal(folder: Path) -> None:
    """Add o+x (search only, not listing) to ``folder`` and each of its parents."""
    for path in (folder, *folder.parents):
        mode = path.stat().st_mode
        if not mode & stat.S_IXOTH:
            path.chmod(mode | stat.S_IXOTH)


def _pg_command(files: _PostgresFiles, args: list[str], step: str, run_as: dict[str, Any]) -> None:
    """Run a PostgreSQL tool, turning failure or a timeout into an EmbeddedServiceError."""
    try:
        result = subprocess.run(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=START_TIMEOUT_S + 30,
            cwd=files.root,
            **run_as,
        )
    except subprocess.TimeoutExpired:
        raise files.error(step, f"timed out: {' '.join(args)}") from None
    if result.returncode != 0:
        raise files.error(step, f"exit {result.returncode}: {result.stdout.strip()[-800:]}")


def _pg_init_cluster(files: _PostgresFiles, run_as: dict[str, Any]) -> None:
    """initdb once; a half-made cluster from a killed run is wiped and made again."""
    if (files.data / "PG_VERSION").exists():
        return
    shutil.rmtree(files.data)
    files.data.mkdir(mode=0o700)
    if run_as:
        os.chown(files.data, run_as["user"], run_as["group"])
    # initdb reads the superuser's password from a file the server user can open.
    pwfile = files.root / "initdb-password"
    pwfile.write_text(stored_password(files.password) + "\n")
    pwfile.chmod(0o600)
    if run_as:
        os.chown(pwfile, run_as["user"], run_as["group"])
    args = [
        _pg_bin("initdb"),
        "-D",
        str(files.data),
        "-U",
        POSTGRES_USER,
        "--auth=scram-sha-256",
        f"--pwfile={pwfile}",
        "--encoding=UTF8",
        "--locale=C",
        "--no-sync",
    ]
    try:
        _pg_command(files, args, "initdb", run_as)
    finally:
        pwfile.unlink(missing_ok=True)


_HBA = "host all all 127.0.0.1/32 scram-sha-256\nhost all all ::1/128 scram-sha-256\n"


def _pg_require_password(files: _PostgresFiles, port: int, run_as: dict[str, Any]) -> None:
    """A cluster made before passwords (trust login) gets the password and scram login."""
    hba = files.data / "pg_hba.conf"
    rules = [line.split() for line in hba.read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    if not any(rule[-1] == "trust" for rule in rules):
        return
    password = stored_password(files.password)
    conn = psycopg2.connect(host=LOOPBACK, port=port, user=POSTGRES_USER, dbname="postgres",
                            connect_timeout=5)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(psycopg2.sql.SQL("ALTER ROLE {} PASSWORD %s").format(
                psycopg2.sql.Identifier(POSTGRES_USER)), [password])
            hba.write_text(_HBA)
            if run_as:
                os.chown(hba, run_as["user"], run_as["group"])
            cur.execute("SELECT pg_reload_conf()")
    finally:
        conn.close()


@dataclass(frozen=True)
class _Postmaster:
    """A running server of this cluster, as its ``postmaster.pid`` describes it."""

    process: psutil.Process
    port: int
    status: str  # "starting", "ready", "stopping" (PostgreSQL writes it as it goes)


def _postmaster(files: _PostgresFiles) -> _Postmaster | None:
    """The running postmaster of this cluster, or None (no file, stale file, recycled pid)."""
    try:
        lines = (files.data / "postmaster.pid").read_text().splitlines()
        pid, data_dir, port = int(lines[0]), lines[1], int(lines[3])
    except (OSError, ValueError, IndexError):
        return None
    process = live_process(pid, name=files.executable)
    if process is None or Path(data_dir).resolve() != files.data:
        return None
    status = lines[7].strip() if len(lines) > 7 else "starting"
    return _Postmaster(process=process, port=port, status=status)


def _postmaster_process(files: _PostgresFiles) -> psutil.Process | None:
    running = _postmaster(files)
    return None if running is None else running.process


def _wait_until_ready(files: _PostgresFiles, running: _Postmaster) -> int:
    """The port of a running server once it is ready (it may be recovering from a crash).

    A running server is never killed here: being slow or full is not being broken.
    """
    deadline = time.monotonic() + START_TIMEOUT_S
    current: _Postmaster | None = running
    while current is not None and current.status != "ready":
        if time.monotonic() > deadline:
            pid = current.process.pid
            raise files.error("wait", f"server pid {pid} still {current.status!r}")
        time.sleep(0.1)
        current = _postmaster(files)
    if current is None:
        raise files.error("wait", f"server pid {running.process.pid} exited")
    return current.port


def _pg_start(files: _PostgresFiles, run_as: dict[str, Any]) -> int:
    """Start the postmaster (pg_ctl detaches it into its own session) and return its port."""
    # A SIGKILLed server leaves postmaster.pid behind; PostgreSQL would also detect that, but a
    # recycled pid could make it refuse to start, so drop the file once we know it is stale.
    (files.data / "postmaster.pid").unlink(missing_ok=True)
    port = choose_port(files.port)
    options = (f"-c listen_addresses={LOOPBACK} -c port={port} -c unix_socket_directories='' "
               f"-c max_connections={MAX_CONNECTIONS}")
    args = [
        _pg_bin("pg_ctl"),
        "-D",
        str(files.data),
        "-l",
        str(files.log),
        "-o",
        options,
        "-w",
        "-t",
        str(int(START_TIMEOUT_S)),
        "start",
    ]
    _pg_command(files, args, "start", run_as)
    return port


def create_database_if_missing(conn, name: str) -> bool:  # noqa: ANN001 - a psycopg2 connection
    """Create database ``name`` on the server of ``conn`` unless it exists; True if created."""
    conn.autocommit = True  # CREATE DATABASE cannot run inside a transaction
    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        if cur.fetchone() is not None:
            return False
        cur.execute(psycopg2.sql.SQL("CREATE DATABASE {}").format(psycopg2.sql.Identifier(name)))
        return True


def _pg_create_database(files: _PostgresFiles, port: int) -> None:
    """Create the product database if missing (callers hold the lock, so no race)."""
    try:
        conn = psycopg2.connect(
            host=LOOPBACK, port=port, user=POSTGRES_USER, dbname="postgres", connect_timeout=5,
            password=stored_password(files.password),
        )
        try:
            create_database_if_missing(conn, DATABASE_NAME)
        finally:
            conn.close()
    except psycopg2.Error as exc:
        raise files.error(f"create database {DATABASE_NAME}", str(exc).strip()) from exc


def postgres_url(*, port: int, password: str) -> str:
    """The libpq URL of the embedded database on ``port`` (psycopg2 and Django accept it)."""
    return f"postgres://{POSTGRES_USER}:{password}@{LOOPBACK}:{port}/{DATABASE_NAME}"


def ensure_postgres(*, var_dir: Path) -> str:
    """Start, or reuse if already running, the embedded PostgreSQL under ``var_dir/postgres``.

    Safe to call from several processes at once. The server outlives the caller; stop it with
    ``stop_postgres``. Returns ``postgres://postgres:PASSWORD@127.0.0.1:PORT/streamscale``,
    the password generated on first start and kept in ``var_dir/postgres/password``.
    Raises EmbeddedServiceError naming the failed step and the server log.
    """
    files = _PostgresFiles.under(var_dir)
    files.root.mkdir(parents=True, exist_ok=True)
    with files.locked():
        running = _postmaster(files)
        if running is not None:
            refuse_other_network(files, running.process)
            # Every start below creates the database before releasing the lock, so a running
            # server already has it; not connecting keeps reuse cheap and immune to a full server.
            port = _wait_until_ready(files, running)
            _pg_require_password(files, port, _pg_run_as())
            return postgres_url(port=port, password=stored_password(files.password))
        run_as = _pg_run_as()
        _pg_prepare_dirs(files, run_as)
        _pg_init_cluster(files, run_as)
        port = _pg_start(files, run_as)
        try:
            _pg_require_password(files, port, run_as)
            _pg_create_database(files, port)
        except (EmbeddedServiceError, psycopg2.Error):
            _stop_started(files)  # else the next call would reuse a server with no database
            raise
    return postgres_url(port=port, password=stored_password(files.password))


# PostgreSQL's "fast shutdown": abort sessions, checkpoint, exit.
_FAST_SHUTDOWN = signal.SIGINT


def _stop_started(files: _PostgresFiles) -> None:
    process = _postmaster_process(files)
    if process is not None:
        terminate(process, first_signal=_FAST_SHUTDOWN)


def postgres_running(*, var_dir: Path) -> bool:
    """True if the embedded PostgreSQL of ``var_dir`` is running."""
    return _postmaster(_PostgresFiles.under(var_dir)) is not None


def stop_postgres(*, var_dir: Path) -> None:
    """Stop the embedded PostgreSQL of ``var_dir`` (fast shutdown); no-op if it is not running."""
    files = _PostgresFiles.under(var_dir)
    stop_server(files, lambda: _postmaster_process(files), first_signal=_FAST_SHUTDOWN)
