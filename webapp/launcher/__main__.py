"""``python -m webapp.launcher run | services | stop-services``.

``run`` is what ``make run`` calls: embedded services (unless DATABASE_URL / REDIS_URL are set),
migrations, the demo data, then the web server, a Celery worker and Celery beat, supervised until
Ctrl-C / SIGTERM: a child that dies is started again after a back-off, and so is an embedded
server that dies.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from webapp import embedded
from webapp.config import BASE_DIR, Config, ConfigError, load_config
from webapp.demo_stream import demo_producer_argv
from webapp.embedded.daemons import port_is_free
from webapp.launcher.children import ChildGroup, say, stop_left_behind
from webapp.launcher.embedded_services import Services, ensure_services
from webapp.launcher.health import answers_health
from webapp.launcher.run_lock import LockHolder, acquire_run_lock, run_lock_holder
from webapp.launcher.supervisor import Supervisor, exit_description

HOST = "127.0.0.1"
DEFAULT_PORT = 8000
HEALTH_TIMEOUT_S = 120.0  # first start runs initdb and all migrations on a 2-core machine
BIN_DIR = Path(sys.executable).parent
SUSPEND_GRACE_S = 15.0  # a driver past this is killed; its run resumes from the checkpoint
CHILDREN_FILE = "launcher-children.json"


class Shutdown(Exception):
    """SIGINT or SIGTERM asked the launcher to stop everything and exit 0."""


class LaunchError(Exception):
    """A start-up step failed; the message says which."""


def _child_env(*, var_dir: Path, services: Services) -> dict[str, str]:
    """Our environment plus the service URLs, so children never start servers of their own."""
    # Each child names its own database connections (web, celery, driver); a name inherited
    # from the caller would label them all alike.
    env = {k: v for k, v in os.environ.items() if k != "PGAPPNAME"}
    env.update(
        DATABASE_URL=services.database_url,
        REDIS_URL=services.redis_url,
        NATS_URL=services.nats_url,
        STREAMSCALE_VAR_DIR=str(var_dir),
        DJANGO_SETTINGS_MODULE="webapp.settings",
        PYTHONUNBUFFERED="1",  # line-by-line output through the pipes
        STREAMSCALE_WEB_PREPARE_AT_START="1",
    )
    return env


def _executable(name: str) -> str:
    path = BIN_DIR / name
    if not path.exists():
        raise LaunchError(f"{path} not found: install the project into this venv first")
    return str(path)


def _prepare_database(group: ChildGroup) -> None:
    """Migrate, then create the demo data if the command exists in this checkout."""
    python, manage = sys.executable, str(BASE_DIR / "manage.py")
    if group.run_step("migrate", [python, manage, "migrate", "--noinput"]) != 0:
        raise LaunchError("python manage.py migrate failed (output above)")
    if not list(BASE_DIR.glob("webapp/*/management/commands/ensure_demo.py")):
        say("[launcher] warning: no ensure_demo command yet; skipping the demo data")
        return
    if group.run_step("demo", [python, manage, "ensure_demo"]) != 0:
        raise LaunchError("python manage.py ensure_demo failed (output above)")


def _start_processes(group: ChildGroup, *, port: int, var_dir: Path, config: Config) -> None:
    celery = _executable("celery")
    # Worker processes use both cores; each runs WEB_THREADS request threads (webapp.bounded).
    # The server prepares its request threads' connections and its code at start (webapp.asgi).
    group.start("web", [
        _executable("uvicorn"), "webapp.asgi:application", "--host", HOST, "--port", str(port),
        "--workers", str(config.web_workers), "--lifespan", "off", "--no-access-log",
        "--no-proxy-headers",
        # A worker busy with a burst on a loaded machine can miss uvicorn's 5 s ping; it is
        # busy, not hung, and killing it would drop its requests and reopen its connections.
        "--timeout-worker-healthcheck", "60",
    ])
    group.start(
        "worker",
        [celery, "-A", "webapp", "worker", "--loglevel=info", "--concurrency=2", "--pool=prefork"],
    )
    if config.demo:
        group.start("producer", demo_producer_argv(sys.executable))
    group.start(
        "beat",
        [
            celery,
            "-A",
            "webapp",
            "beat",
            "--loglevel=info",
            "--schedule",
            str(var_dir / "celerybeat-schedule"),
        ],
    )


def _check_children(group: ChildGroup) -> None:
    dead = group.first_exited()
    if dead is None:
        return
    how = exit_description(dead.process.returncode)
    raise LaunchError(f"{dead.name} exited unexpectedly with {how}")


def _wait_healthy(group: ChildGroup, *, url: str) -> None:
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    while not answers_health(url):
        _check_children(group)
        if time.monotonic() > deadline:
            raise LaunchError(f"{url}healthz did not answer 200 within {HEALTH_TIMEOUT_S:.0f} s")
        time.sleep(0.5)


def _raise_shutdown(signum: int, frame: FrameType | None) -> None:
    raise Shutdown(signal.Signals(signum).name)


def _serve(
    group: ChildGroup,
    services: Services,
    *,
    var_dir: Path,
    port: int,
    url: str,
    config: Config,
) -> None:
    """Every start-up step, then supervision; leaves only by exception."""
    left = stop_left_behind(var_dir / CHILDREN_FILE)
    if left:
        say(f"[launcher] stopped what an earlier launcher of {var_dir} left: "
            f"pids {', '.join(map(str, left))}")
    if not port_is_free(port, HOST):
        raise LaunchError(f"port {port} on {HOST} is already in use: pass --port N or set PORT")
    ensure_services(
        var_dir=var_dir, database_url=config.database_url, redis_url=config.redis_url,
        services=services, nats_url=config.nats_url,
    )
    group.env = _child_env(var_dir=var_dir, services=services)
    _prepare_database(group)
    services.migrated = True
    _start_processes(group, port=port, var_dir=var_dir, config=config)
    _wait_healthy(group, url=url)
    say(f"streamscale is running at {url}  (Ctrl-C to stop)")
    Supervisor(group, services).run_forever()


def _suspend_drivers(group: ChildGroup, services: Services) -> None:
    """Stop the run drivers cleanly while the database is still up; their runs stay active
    and resume from their checkpoints at the next start.

    The worker and beat stop first: supervision would otherwise see a suspended driver as a
    dead one and start it again.
    """
    group.stop(["beat", "worker"])
    if services.migrated:
        group.run_step(
            "suspend",
            [sys.executable, str(BASE_DIR / "manage.py"), "runs_suspend",
             "--grace", str(SUSPEND_GRACE_S)],
        )


def cmd_run(*, var_dir: Path, port: int, config: Config) -> int:
    """Run the whole product until a signal (exit 0) or a failure (exit 1), on the servers
    ``config`` names (embedded ones for those it leaves unset)."""
    url = f"http://{HOST}:{port}/"
    lock = acquire_run_lock(var_dir=var_dir, url=url)
    if isinstance(lock, LockHolder):
        say(
            f"streamscale is already running (pid {lock.pid}); stop it first or use its URL "
            f"{lock.url or url}"
        )
        return 1
    signal.signal(signal.SIGINT, _raise_shutdown)
    signal.signal(signal.SIGTERM, _raise_shutdown)
    group = ChildGroup(cwd=BASE_DIR, env={}, pid_file=var_dir / CHILDREN_FILE)
    state_redis = config.spark_master.startswith("spark://") and not config.state_redis_url
    services = Services("", "", state_redis=state_redis)
    code = 1
    try:
        _serve(group, services, var_dir=var_dir, port=port, url=url, config=config)
    except Shutdown as reason:
        say(f"[launcher] {reason}: stopping")
        code = 0
    except (LaunchError, embedded.EmbeddedError) as error:
        say(f"[launcher] error: {error}; stopping")
    finally:
        # A second Ctrl-C must not abandon the clean-up half-way.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            _suspend_drivers(group, services)
            group.stop_all()
            services.stop_started()
        finally:
            lock.release()
    say("[launcher] stopped")
    return code


def cmd_services(*, var_dir: Path) -> int:
    """Start (or reuse) the embedded servers, print their URLs and leave them running."""
    print(f"DATABASE_URL={embedded.ensure_postgres(var_dir=var_dir)}")
    print(f"REDIS_URL={embedded.ensure_redis(var_dir=var_dir)}")
    print(f"NATS_URL={embedded.ensure_nats(var_dir=var_dir)}")
    return 0


def cmd_stop_services(*, var_dir: Path) -> int:
    """Stop the embedded servers, unless a launcher is using them."""
    holder = run_lock_holder(var_dir=var_dir)
    if holder is not None:
        print(f"streamscale is running (pid {holder.pid}) on these services; stop it first")
        return 1
    embedded.stop_redis(var_dir=var_dir)
    embedded.stop_state_redis(var_dir=var_dir)
    embedded.stop_nats(var_dir=var_dir)
    embedded.stop_postgres(var_dir=var_dir)
    print("embedded services stopped")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m webapp.launcher",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--var-dir",
        type=Path,
        help="state folder (default STREAMSCALE_VAR_DIR or var/ in the checkout)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the web server, worker and beat, supervised")
    run.add_argument("--port", type=int, help=f"HTTP port (default PORT or {DEFAULT_PORT})")
    commands.add_parser("services",
                        help="start the embedded PostgreSQL, Redis and NATS, print URLs")
    commands.add_parser("stop-services", help="stop the embedded PostgreSQL, Redis and NATS")
    return parser


def _port_from_env() -> int:
    raw = os.environ.get("PORT", "").strip() or str(DEFAULT_PORT)
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ConfigError(f"PORT={raw!r} is not a TCP port number")
    return int(raw)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run one command; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        config = load_config()
        port = args.port if getattr(args, "port", None) else _port_from_env()
    except ConfigError as error:
        print(f"streamscale: configuration error: {error}", file=sys.stderr)
        return 2
    var_dir = (args.var_dir or config.var_dir).resolve()
    try:
        if args.command == "services":
            return cmd_services(var_dir=var_dir)
        if args.command == "stop-services":
            return cmd_stop_services(var_dir=var_dir)
    except embedded.EmbeddedError as error:
        print(f"streamscale: {error}", file=sys.stderr)
        return 1
    return cmd_run(var_dir=var_dir, port=port, config=config)


if __name__ == "__main__":
    sys.exit(main())
