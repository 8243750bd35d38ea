"""Files a job names stay inside the data folder; sink tables stay in the sink schema."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.runtime.errors import UnsupportedJobError
from engine.runtime.io.data_access import resolve_data_path, sink_table


def test_paths_resolve_inside_the_data_folder(tmp_path: Path) -> None:
    root = str(tmp_path.resolve())
    assert resolve_data_path("in/events", root) == os.path.join(root, "in", "events")


@pytest.mark.parametrize("path", ["../x", "/etc", "a/../../x", "bad\x00"])
def test_paths_out_of_the_data_folder_are_refused(tmp_path: Path, path: str) -> None:
    with pytest.raises(UnsupportedJobError, match="data folder"):
        resolve_data_path(path, str(tmp_path.resolve()))


def test_a_symlink_out_of_the_data_folder_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    (root / "leak").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsupportedJobError, match="leads out of the data folder"):
        resolve_data_path("leak/out", str(root.resolve()))


def test_sink_tables_are_quoted_in_the_sink_schema(monkeypatch) -> None:
    monkeypatch.delenv("STREAMSCALE_SINK_SCHEMA", raising=False)
    assert sink_table("campaign_views") == '"streamscale_sink"."campaign_views"'
    with pytest.raises(UnsupportedJobError):
        sink_table('x"; DROP TABLE jobs_job; --')
