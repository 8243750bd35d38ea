"""Where a bench keeps what it measured: one JSON file per bench under
``docs/benchmarks/results/``, the figures it printed plus when and how they were measured."""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent.parent / "docs" / "benchmarks" / "results"


def result_name(benchmark: str, only: str | None = None) -> str:
    """The result file's name (without ``.json``): the bench, and the row it was limited to."""
    return f"{benchmark}-{only}" if only else benchmark


def bench_command(argv: list[str]) -> str:
    """The command line that ran the bench, as a user would type it again."""
    return shlex.join(["python", "-m", "bench", *argv])


def result_record(figures: dict[str, Any], *, command: str,
                  measured_at: datetime | None = None) -> dict[str, Any]:
    """The figures with ``measured_at`` (UTC, ISO 8601, to the second) and ``command``."""
    moment = (measured_at or datetime.now(UTC)).astimezone(UTC)
    return {**figures, "measured_at": moment.isoformat(timespec="seconds"), "command": command}


def result_save(record: dict[str, Any], *, name: str, folder: Path = RESULTS_DIR) -> Path:
    """Writes ``record`` to ``folder/name.json``, replacing the bench's last result."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(path)
    return path


def results_load(folder: Path = RESULTS_DIR) -> dict[str, dict[str, Any]]:
    """Every result in ``folder`` by name, in name order."""
    return {path.stem: json.loads(path.read_text())
            for path in sorted(folder.glob("*.json"))}
