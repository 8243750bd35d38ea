"""Where a job's sinks write: the Postgres tables and data folders it would change.

Two jobs writing to one table or folder would mix (or, for a table's staging table, destroy)
each other's rows, so the control plane lets one job own each target; this module says what a
document's targets are and which targets overlap.

>>> [t.label for t in sink_targets({"operators": [
...     {"id": "out", "type": "sink.postgres", "params": {"table": "counts"}}]})]
["table 'counts'"]
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

STAGING_SUFFIX = "__staging"
"""A Postgres sink stages an epoch's rows in the table named like its own with this suffix."""
COMMITS_TABLE = "streamscale_sink_commits"
"""The Postgres sinks' commit records (one per sink and epoch), owned by the product."""
TABLE, FOLDER = "table", "folder"


@dataclass(frozen=True)
class SinkTarget:
    """A table (``kind`` "table", by its plain name) or a folder (``kind`` "folder", relative
    to the data folder, normalised) a sink operator writes to."""

    kind: str
    name: str
    operator: str = ""

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name!r}"

    def touches(self) -> frozenset[str]:
        """The names this target writes: a table and its staging table; a folder."""
        if self.kind == TABLE:
            return frozenset({self.name, self.name + STAGING_SUFFIX})
        return frozenset({self.name})

    def overlaps(self, other: SinkTarget) -> bool:
        """Whether writing to both could change the same rows or files."""
        if self.kind != other.kind:
            return False
        if self.kind == TABLE:
            return bool(self.touches() & other.touches())
        return _within(self.name, other.name) or _within(other.name, self.name)


def _within(folder: str, ancestor: str) -> bool:
    return folder == ancestor or ancestor == "." or folder.startswith(ancestor + "/")


def sink_targets(document: Mapping[str, Any]) -> tuple[SinkTarget, ...]:
    """The tables and folders the sinks of a (checked) DAG document write to."""
    targets: list[SinkTarget] = []
    for op in document.get("operators", []):
        params = op.get("params") or {}
        if op.get("type") == "sink.postgres" and isinstance(params.get("table"), str):
            targets.append(SinkTarget(TABLE, params["table"], op.get("id", "")))
        elif op.get("type") == "sink.files" and isinstance(params.get("path"), str):
            targets.append(SinkTarget(FOLDER, folder_name(params["path"]), op.get("id", "")))
    return tuple(targets)


def folder_name(path: str) -> str:
    """A data folder's one spelling: ``./out//a/`` and ``out/a`` are the same folder."""
    return posixpath.normpath(path.replace("\\", "/").strip() or ".")


def reserved_target_reason(target: SinkTarget) -> str | None:
    """Why no job may write to ``target`` (the product's own table), or None."""
    if target.kind == TABLE and target.touches() & SinkTarget(TABLE, COMMITS_TABLE).touches():
        return f"{target.label} is the product's record of sink commits"
    return None
