"""Where a job's files and tables may be: inside the data folder, in the sink schema.

A job names files relative to the data folder (``STREAMSCALE_DATA_DIR``, by default
``var/data`` of the project) and Postgres tables by a plain name, written into the sink
schema (``STREAMSCALE_SINK_SCHEMA``) of the sink database (``STREAMSCALE_SINK_DSN``). The
control plane sets these for its drivers; a path that leaves the folder (``..``, an absolute
path, a symlink pointing out) is refused before anything is read or written.
"""

from __future__ import annotations

import os
import re

from engine.runtime.errors import UnsupportedJobError
from engine.runtime.spark.session import project_root

DATA_DIR_VARIABLE = "STREAMSCALE_DATA_DIR"
SINK_DSN_VARIABLE = "STREAMSCALE_SINK_DSN"
SINK_SCHEMA_VARIABLE = "STREAMSCALE_SINK_SCHEMA"
DEFAULT_SINK_SCHEMA = "streamscale_sink"
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}\Z")


def data_root() -> str:
    """The data folder, created if missing, with symlinks resolved."""
    root = os.environ.get(DATA_DIR_VARIABLE) or os.path.join(project_root(), "var", "data")
    os.makedirs(root, exist_ok=True)
    return os.path.realpath(root)


def resolve_data_path(path: str, root: str | None = None) -> str:
    """The absolute path of ``path`` inside the data folder, or UnsupportedJobError."""
    base = root or data_root()
    if "\x00" in path or os.path.isabs(path) or ".." in path.replace("\\", "/").split("/"):
        raise UnsupportedJobError(f"path {path!r} must be relative to the data folder, "
                                  "without '..'")
    resolved = os.path.realpath(os.path.join(base, path))
    if os.path.commonpath([resolved, base]) != base:
        raise UnsupportedJobError(f"path {path!r} leads out of the data folder (a symlink?)")
    return resolved


def sink_schema() -> str:
    """The schema every sink.postgres table is written to."""
    schema = os.environ.get(SINK_SCHEMA_VARIABLE) or DEFAULT_SINK_SCHEMA
    if not _PLAIN_NAME.match(schema):
        raise UnsupportedJobError(f"{SINK_SCHEMA_VARIABLE}={schema!r} is not a plain name")
    return schema


def sink_table(table: str) -> str:
    """The quoted, schema-qualified name of a sink table."""
    if not _PLAIN_NAME.match(table):
        raise UnsupportedJobError(f"sink.postgres table {table!r} is not a plain name")
    return f'"{sink_schema()}"."{table}"'


def sink_dsn() -> str | None:
    """The sink database: ``STREAMSCALE_SINK_DSN``, else the control plane's database (where
    the sink schema keeps the rows apart from the product's tables)."""
    return os.environ.get(SINK_DSN_VARIABLE) or os.environ.get("DATABASE_URL") or None
