"""The docs stay true to the tree: every file or folder they name in backticks exists, and the
README stays short enough to read in five minutes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ["README.md", "docs/ARCHITECTURE.md", "docs/operations.md"]
README_MAX_LINES = 250
# A backticked path in the repository: `engine/runtime/api.py`, `webapp/runs/`, `static/js/run.js`.
_PATH = re.compile(
    r"`((?:engine|webapp|static|templates|tests|bench|docs|examples)/[A-Za-z0-9_./-]*)`")


def named_paths(text: str) -> list[str]:
    """The repository paths a document names in backticks."""
    return sorted(set(_PATH.findall(text)))


def test_named_paths_are_found_in_backticks_only() -> None:
    text = "see `engine/runtime/api.py` (`start_run`), `webapp/runs/`, engine/nowhere.py"

    assert named_paths(text) == ["engine/runtime/api.py", "webapp/runs/"]


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_a_doc_names_exists(doc: str) -> None:
    paths = named_paths((ROOT / doc).read_text())
    missing = [p for p in paths if not (ROOT / p).exists()]

    assert paths, f"{doc} names no file: is the pattern still right?"
    assert missing == [], f"{doc} names files that do not exist: {missing}"


def test_the_architecture_names_the_runtime_files_it_describes() -> None:
    paths = named_paths((ROOT / "docs/ARCHITECTURE.md").read_text())

    assert {"engine/runtime/driver/epoch.py", "engine/runtime/stage/regions.py",
            "engine/runtime/state/base.py"} <= set(paths)


def test_every_file_of_the_runtime_rooms_exists() -> None:
    """The rooms' drawing names files relative to their room (``driver/  ... epoch.py``)."""
    text = (ROOT / "docs/ARCHITECTURE.md").read_text()
    drawing = text.split("## The runtime's rooms", 1)[1].split("```")[1]
    named, room = [], None
    for line in drawing.splitlines():
        opened = re.match(r"^([a-z_]+)/\s", line)
        room = opened.group(1) if opened else room
        named += [f"engine/runtime/{room}/{name}" for name in re.findall(r"[a-z_]+\.py", line)]
    missing = [p for p in named if not (ROOT / p).exists()]

    assert len(named) > 20 and missing == []


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()

    assert len(lines) <= README_MAX_LINES
