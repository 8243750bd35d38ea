"""Django settings. All outside configuration comes from `webapp.config.load_config`."""

from __future__ import annotations

import sys

from webapp.config import BASE_DIR, ConfigError, load_config, parse_database_url

try:
    CONFIG = load_config()
except ConfigError as error:
    sys.stderr.write(f"streamscale: configuration error: {error}\n")
    raise SystemExit(2) from None


def _service_urls() -> tuple[str, str]:
    """The configured URLs, or those of the embedded servers under var/ (started on demand)."""
    database_url, redis_url = CONFIG.database_url, CONFIG.redis_url
    if database_url is None or redis_url is None:
        from webapp import embedded

        if database_url is None:
            database_url = embedded.ensure_postgres(var_dir=CONFIG.var_dir)
        if redis_url is None:
            redis_url = embedded.ensure_redis(var_dir=CONFIG.var_dir)
    return database_url, redis_url


def _state_redis_url() -> str | None:
    """The Redis of the keyed state, needed on a standalone cluster only: the configured one,
    or a private one under var/ that fsyncs every write."""
    if CONFIG.state_redis_url is not None or not CONFIG.spark_master.startswith("spark://"):
        return CONFIG.state_redis_url
    from webapp import embedded

    return embedded.ensure_state_redis(var_dir=CONFIG.var_dir)


def _nats_url() -> str:
    """The NATS that ``source.nats`` jobs reach by ``env:NATS_URL``: the configured one, or a
    private one with JetStream under var/."""
    if CONFIG.nats_url is not None:
        return CONFIG.nats_url
    from webapp import embedded

    return embedded.ensure_nats(var_dir=CONFIG.var_dir)


DATABASE_URL, REDIS_URL = _service_urls()
STATE_REDIS_URL = _state_redis_url()
NATS_URL = _nats_url()
SPARK_MASTER = CONFIG.spark_master
VAR_DIR = CONFIG.var_dir
AUDIT_RETENTION_DAYS = CONFIG.audit_retention_days
RUN_START_TIMEOUT_S = CONFIG.run_start_timeout_s
WARM_STANDBY = CONFIG.warm_standby
WARM_STANDBY_CLUSTER = CONFIG.warm_standby_cluster
DATA_DIR = CONFIG.data_dir
# Jobs' Postgres sinks write only to this database and schema, never the product's tables.
SINK_DATABASE_URL = CONFIG.sink_database_url or DATABASE_URL
SINK_SCHEMA = CONFIG.sink_schema
ADMIN_PASSWORD = CONFIG.admin_password
DEMO = CONFIG.demo
# The web server's request threads (each holds at most one database connection) and how many
# requests may wait for one before the rest are answered 503 (see webapp.bounded).
WEB_THREADS = CONFIG.web_threads
WEB_QUEUE = CONFIG.web_queue
WEB_QUEUE_WAIT_S = 10.0
METRICS_FULL_RESOLUTION_S = CONFIG.metrics_full_resolution_s
AUTOSCALE_DOWN_WINDOW_S = CONFIG.autoscale_down_window_s

SECRET_KEY = CONFIG.secret_key
DEBUG = CONFIG.debug
ALLOWED_HOSTS = list(CONFIG.allowed_hosts)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "webapp.accounts",
    "webapp.jobs",
    "webapp.audit",
    "webapp.live",
    "webapp.runs",
    "webapp.samples",
    "webapp.reconfigurations",
    "webapp.autoscaling",
    "webapp.pages",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "webapp.security_headers.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "webapp.accounts.middleware.BearerTokenMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "webapp.dependencies.DependencyErrorsMiddleware",
]

ROOT_URLCONF = "webapp.urls"
ASGI_APPLICATION = "webapp.asgi.application"
AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "job-list"
LOGOUT_REDIRECT_URL = "login"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "webapp.accounts.context_processors.role",
            ],
        },
    },
]

DATABASES = {"default": parse_database_url(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "prefix": "streamscale"},
    }
}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_RESULT_EXPIRES = 3600
# The watcher's beat: half of it, on average, is how long a dead driver waits to be noticed.
RUNS_WATCH_S = 1.0
CELERY_BEAT_SCHEDULE = {
    "audit-prune-daily": {"task": "webapp.audit.tasks.audit_prune", "schedule": 24 * 3600.0},
    # Per-epoch metrics past METRICS_FULL_RESOLUTION_S become one-minute roll-ups.
    "metrics-compact": {"task": "webapp.jobs.tasks.metrics_compact", "schedule": 60.0,
                        "options": {"expires": 60.0}},
    # Drivers that die are noticed within this period and restarted from their checkpoints.
    "runs-watch": {"task": "webapp.runs.tasks.runs_watch", "schedule": RUNS_WATCH_S,
                   "options": {"expires": RUNS_WATCH_S}},
    "autoscale-evaluate": {"task": "webapp.autoscaling.tasks.autoscale_evaluate",
                           "schedule": 10.0, "options": {"expires": 10.0}},
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
     "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = CONFIG.secure_cookies
CSRF_COOKIE_SECURE = CONFIG.secure_cookies
SESSION_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Behind a TLS-terminating proxy, trust its scheme header only when cookies are Secure.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if CONFIG.secure_cookies else None
DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000_000
CSRF_COOKIE_HTTPONLY = False  # the pages' scripts send it back as X-CSRFToken
CSRF_FAILURE_VIEW = "webapp.api.http.csrf_failure"
X_FRAME_OPTIONS = "DENY"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"timed": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "timed"}},
    "root": {"handlers": ["console"], "level": "INFO"},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
