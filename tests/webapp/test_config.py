"""Configuration: malformed values stop start-up with a message naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.webapp.support import ROOT
from webapp.config import ConfigError, load_config, parse_database_url


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DATABASE_URL", "mysql://root@localhost/x"),
        ("DATABASE_URL", "postgres://postgres@db.invalid:5432/"),
        ("DATABASE_URL", "postgres://postgres@127.0.0.1:notaport/db"),
        ("REDIS_URL", "http://cache.invalid:6379/0"),
        ("REDIS_URL", "redis://cache.invalid:6379/zero"),
        ("SPARK_MASTER", "yarn"),
        ("SECRET_KEY", "short"),
        ("ALLOWED_HOSTS", " , "),
        ("ALLOWED_HOSTS", "good.example, bad host"),
        ("DEBUG", "maybe"),
        ("AUDIT_RETENTION_DAYS", "0"),
        ("WEB_THREADS", "0"),
        ("WEB_WORKERS", "two"),
        ("WEB_QUEUE", "many"),
        ("METRICS_FULL_RESOLUTION_S", "-5"),
        ("AUTOSCALE_DOWN_WINDOW_S", "0"),
        ("STREAMSCALE_DEMO", "sometimes"),
        ("WARM_STANDBY", "perhaps"),
        ("WARM_STANDBY_CLUSTER", "if needed"),
    ],
)
def test_malformed_value_names_the_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        load_config({name: value})


def test_defaults_are_the_embedded_setup():
    config = load_config({})
    assert config.database_url is None and config.redis_url is None
    assert config.spark_master == "local[*]"
    assert config.debug is False
    assert "127.0.0.1" in config.allowed_hosts
    assert config.demo is True
    assert config.autoscale_down_window_s == 300
    assert config.warm_standby is True
    assert config.warm_standby_cluster is False


def test_valid_values_are_taken():
    config = load_config(
        {
            "DATABASE_URL": "postgres://postgres@db.invalid:5432/streamscale",
            "REDIS_URL": "redis://cache.invalid:6379/2",
            "SPARK_MASTER": "spark://127.0.0.1:7077",
            "ALLOWED_HOSTS": "a.example,b.example",
            "DEBUG": "yes",
            "STREAMSCALE_DEMO": "off",
            "WARM_STANDBY": "false",
            "WARM_STANDBY_CLUSTER": "true",
        }
    )
    assert config.spark_master == "spark://127.0.0.1:7077"
    assert config.allowed_hosts == ("a.example", "b.example")
    assert config.debug is True
    assert config.demo is False
    assert config.warm_standby is False
    assert config.warm_standby_cluster is True


def test_database_url_with_socket_directory():
    db = parse_database_url("postgres://postgres@/streamscale?host=/tmp/pg")
    assert db["HOST"] == "/tmp/pg" and db["NAME"] == "streamscale" and db["PORT"] == ""


def test_start_up_stops_with_the_variable_named():
    env = dict(os.environ, REDIS_URL="redis://127.0.0.1:99999/0", DATABASE_URL="postgres://x@h/db")
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "REDIS_URL" in result.stderr and "port" in result.stderr
    assert "Traceback" not in result.stderr
