"""Read the environment once, at start-up, and fail fast with a message naming the variable.

Every setting the product takes from outside comes through `load_config`. Settings, the launcher
and the management commands call it; nothing else reads `os.environ` for configuration.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_HOST_RE = re.compile(r"^(\*|\.?[A-Za-z0-9_.:\-\[\]]+)$")


class ConfigError(Exception):
    """A configuration value is malformed; the message names the variable and what is wrong."""


@dataclass(frozen=True)
class Config:
    """The validated configuration of one process."""

    var_dir: Path
    database_url: str | None
    redis_url: str | None
    spark_master: str
    secret_key: str
    allowed_hosts: tuple[str, ...]
    debug: bool
    audit_retention_days: int
    data_dir: Path
    sink_database_url: str | None
    sink_schema: str
    admin_password: str | None
    secure_cookies: bool
    web_workers: int
    web_threads: int
    web_queue: int
    metrics_full_resolution_s: int
    state_redis_url: str | None = None
    nats_url: str | None = None
    """The NATS server (with JetStream) that ``env:NATS_URL`` in a ``source.nats`` names."""
    run_start_timeout_s: int = 300
    autoscale_down_window_s: int = 300
    """How long a run is calm before the autoscaler scales it down; no decision of the
    autoscaler is undone sooner."""
    demo: bool = True
    """Whether start-up creates the demo job and runs it (with its event producer)."""
    warm_standby: bool = True
    """Whether a driver process is kept started, Spark up, for the next run start or restart
    (``webapp.runs.standby``)."""
    warm_standby_cluster: bool = False
    """Whether the warm standby is kept on a standalone cluster too: its application holds
    executors of its own, so the cluster must have room for one more application."""


def load_config(environ: Mapping[str, str] | None = None) -> Config:
    """Validate the environment and return the configuration, or raise ConfigError."""
    env = os.environ if environ is None else environ
    database_url = _optional(env, "DATABASE_URL")
    redis_url = _optional(env, "REDIS_URL")
    state_redis_url = _optional(env, "STATE_REDIS_URL")
    if database_url is not None:
        parse_database_url(database_url)
    if redis_url is not None:
        _check_redis_url(redis_url)
    var_dir = Path(env.get("STREAMSCALE_VAR_DIR") or BASE_DIR / "var").resolve()
    sink_database_url = _optional(env, "STREAMSCALE_SINK_DSN")
    if sink_database_url is not None:
        parse_database_url(sink_database_url, variable="STREAMSCALE_SINK_DSN")
    debug = _bool(env, "DEBUG", default=False)
    allowed_hosts = _allowed_hosts(env)
    if state_redis_url is not None:
        _check_redis_url(state_redis_url, name="STATE_REDIS_URL")
    nats_url = _optional(env, "NATS_URL")
    if nats_url is not None:
        _check_nats_url(nats_url)
    return Config(
        var_dir=var_dir,
        database_url=database_url,
        redis_url=redis_url,
        spark_master=_spark_master(env),
        secret_key=_secret_key(env, var_dir),
        allowed_hosts=allowed_hosts,
        debug=debug,
        audit_retention_days=_positive_int(env, "AUDIT_RETENTION_DAYS", default=365),
        data_dir=_data_dir(env, var_dir),
        sink_database_url=sink_database_url,
        sink_schema=_sink_schema(env),
        admin_password=_optional(env, "STREAMSCALE_ADMIN_PASSWORD"),
        # Off only where every host is this machine: browsers keep Secure cookies on HTTPS.
        secure_cookies=_bool(env, "SECURE_COOKIES",
                             default=not debug and not _loopback_only(allowed_hosts)),
        state_redis_url=state_redis_url,
        nats_url=nats_url,
        run_start_timeout_s=_positive_int(env, "RUN_START_TIMEOUT_S", default=300),
        web_workers=_positive_int(env, "WEB_WORKERS", default=1),
        web_threads=_positive_int(env, "WEB_THREADS", default=4),
        web_queue=_positive_int(env, "WEB_QUEUE", default=256),
        metrics_full_resolution_s=_positive_int(env, "METRICS_FULL_RESOLUTION_S", default=3600),
        autoscale_down_window_s=_positive_int(env, "AUTOSCALE_DOWN_WINDOW_S", default=300),
        demo=_bool(env, "STREAMSCALE_DEMO", default=True),
        warm_standby=_bool(env, "WARM_STANDBY", default=True),
        warm_standby_cluster=_bool(env, "WARM_STANDBY_CLUSTER", default=False),
    )


def _optional(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _bool(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    raw = env.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean: use 1/0, true/false, yes/no or on/off")


def _positive_int(env: Mapping[str, str], name: str, *, default: int) -> int:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a whole number") from None
    if value < 1:
        raise ConfigError(f"{name}={raw!r} must be at least 1")
    return value


def _secret_key(env: Mapping[str, str], var_dir: Path) -> str:
    value = env.get("SECRET_KEY")
    if value is None:
        return _stored_secret_key(var_dir / "secret_key")
    if len(value.strip()) < 16:
        raise ConfigError("SECRET_KEY must be at least 16 characters long")
    return value


def _stored_secret_key(path: Path) -> str:
    """A random key made on first start and kept (readable by its owner only), so sessions
    stay valid across restarts and no two installations share one."""
    from webapp.embedded.credentials import stored_secret

    return stored_secret(path, lambda: secrets.token_urlsafe(48))


def _data_dir(env: Mapping[str, str], var_dir: Path) -> Path:
    raw = env.get("STREAMSCALE_DATA_DIR")
    path = Path(raw).resolve() if raw and raw.strip() else var_dir / "data"
    for static in (BASE_DIR / "static", var_dir / "static"):
        if path == static.resolve() or static.resolve() in path.parents:
            raise ConfigError(f"STREAMSCALE_DATA_DIR={str(path)!r} is inside the served static "
                              f"folder {str(static)!r}: jobs' files would be public")
    return path


def _sink_schema(env: Mapping[str, str]) -> str:
    value = env.get("STREAMSCALE_SINK_SCHEMA", "").strip() or "streamscale_sink"
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", value) or value in ("public", "pg_catalog"):
        raise ConfigError(f"STREAMSCALE_SINK_SCHEMA={value!r} must be a lower-case plain name "
                          "other than public")
    return value


def _loopback_only(hosts: tuple[str, ...]) -> bool:
    return all(h in ("127.0.0.1", "localhost", "[::1]", "testserver") for h in hosts)


def _allowed_hosts(env: Mapping[str, str]) -> tuple[str, ...]:
    raw = env.get("ALLOWED_HOSTS")
    if raw is None:
        return ("127.0.0.1", "localhost", "[::1]", "testserver")
    hosts = tuple(h.strip() for h in raw.split(",") if h.strip())
    if not hosts:
        raise ConfigError("ALLOWED_HOSTS is empty: give a comma-separated list of host names")
    for host in hosts:
        if not _HOST_RE.match(host):
            raise ConfigError(f"ALLOWED_HOSTS has an invalid host name {host!r}")
    return hosts


def _spark_master(env: Mapping[str, str]) -> str:
    value = env.get("SPARK_MASTER", "").strip() or "local[*]"
    if re.fullmatch(r"local(\[(\*|\d+)\])?", value) or re.fullmatch(
        r"spark://[A-Za-z0-9_.\-]+:\d+(,[A-Za-z0-9_.\-]+:\d+)*", value
    ):
        return value
    raise ConfigError(
        f"SPARK_MASTER={value!r} is not a Spark master: use local[*], local[N] or spark://host:port"
    )


def _check_redis_url(url: str, *, name: str = "REDIS_URL") -> None:
    parts = urlsplit(url)
    if parts.scheme not in {"redis", "rediss"} or not parts.hostname:
        raise ConfigError(f"{name}={url!r} is not a redis:// URL with a host")
    _check_port(name, url, parts)
    db = parts.path.lstrip("/")
    if db and not db.isdigit():
        raise ConfigError(f"{name}={url!r} has a database {db!r} that is not a number")


def _check_nats_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in {"nats", "tls"} or not parts.hostname:
        raise ConfigError(f"NATS_URL={url!r} is not a nats:// or tls:// URL with a host")
    _check_port("NATS_URL", url, parts)


def _check_port(name: str, url: str, parts) -> None:  # noqa: ANN001 - SplitResult
    try:
        _ = parts.port  # SplitResult parses the port lazily and raises on a bad one
    except ValueError:
        raise ConfigError(f"{name}={url!r} has an invalid port") from None


def parse_database_url(url: str, variable: str = "DATABASE_URL") -> dict[str, object]:
    """Turn a postgres:// URL into Django's DATABASES entry; raise ConfigError if it is not one.

    A unix socket directory may be given as `?host=/path`, as libpq allows.
    """
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        raise ConfigError(
            f"{variable}={url!r} is not a postgres:// URL (only PostgreSQL is used)"
        )
    _check_port(variable, url, parts)
    name = unquote(parts.path.lstrip("/"))
    if not name:
        raise ConfigError(
            f"{variable}={url!r} names no database (postgres://user@host:port/NAME)"
        )
    query = parse_qs(parts.query)
    host = query.get("host", [parts.hostname or ""])[0]
    if not host:
        raise ConfigError(f"{variable}={url!r} names no host")
    return {
        "ENGINE": "webapp.database",
        "NAME": name,
        "USER": unquote(parts.username or "postgres"),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(parts.port or ""),
        # Connections last between requests (the web server has a fixed set of request
        # threads, see webapp.bounded) and are checked before reuse.
        "CONN_MAX_AGE": 600,
        "CONN_HEALTH_CHECKS": True,
    }


def database_url_of(database: Mapping[str, object]) -> str:
    """The URL of a Django DATABASES entry, for processes this one starts (the reverse of
    `parse_database_url`)."""
    user = str(database.get("USER") or "postgres")
    password = str(database.get("PASSWORD") or "")
    credentials = user + (":" + password if password else "")
    host, port = str(database.get("HOST") or ""), str(database.get("PORT") or "")
    if host.startswith("/"):
        return f"postgres://{credentials}@/{database['NAME']}?host={host}"
    return f"postgres://{credentials}@{host}{':' + port if port else ''}/{database['NAME']}"
