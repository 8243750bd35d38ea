"""``python -m bench report``: rebuilds ``docs/benchmarks.md`` from the results the benches
wrote (``bench.results``): one table of the current figures, each with its target, the
command that prints it and when it was measured, then what each bench's figures mean, taken
from the bench module's docstring."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.results import RESULTS_DIR, results_load

BENCH_DIR = Path(__file__).resolve().parent
REPORT_PATH = BENCH_DIR.parent / "docs" / "benchmarks.md"

# Result name -> the module whose docstring defines its figures (one that is gone is left out).
BENCHES: dict[str, str] = {
    "throughput": "throughput",
    "throughput-redis_stream": "redis_source",
    "throughput-nats": "nats_source",
    "rescale": "rescale",
    "control": "control_plane",
    "state": "state",
    "durability": "state_durability",
    "api": "api",
    "autoscale": "autoscale",
    "recovery": "recovery",
    "startup": "startup",
}
# Figures left out of the table: the bench's own noise and bookkeeping.
NOT_FIGURES = {"context", "measured_at", "command"}
# A bullet that defines figures: "- ``name``: what it is" (or "- `a` / `b`: ...").
_FIGURE_BULLET = re.compile(r"^-\s+(`[^:]*`):\s+(.*)$")


@dataclass(frozen=True)
class Target:
    """A figure's target: how it reads, and whether a result meets it."""

    text: str
    met: Callable[[dict[str, Any]], bool]


def _at_least(figure: str, bound: float) -> Target:
    return Target(f">= {bound:g}", lambda r: r[figure] >= bound)


def _at_most(figure: str, bound: float) -> Target:
    return Target(f"<= {bound:g}", lambda r: r[figure] <= bound)


def _below(figure: str, bound: float) -> Target:
    return Target(f"< {bound:g}", lambda r: r[figure] < bound)


def _equal(figure: str, value: Any) -> Target:
    return Target(json.dumps(value), lambda r: r[figure] == value)


TARGETS: dict[str, dict[str, Target]] = {
    "throughput": {
        "ratio": _at_least("ratio", 1.5),
        "redis_stream.redis_vs_generator": Target(
            ">= 0.8", lambda r: r["redis_stream"]["redis_vs_generator"] >= 0.8),
    },
    "throughput-redis_stream": {
        "redis_vs_generator": _at_least("redis_vs_generator", 0.8),
        "redis_vs_generator_2": _at_least("redis_vs_generator_2", 0.8),
        "redis_vs_generator_8": _at_least("redis_vs_generator_8", 0.8),
    },
    "throughput-nats": {"nats_vs_generator": _at_least("nats_vs_generator", 0.8)},
    "state": {
        "vsn_growth": _at_most("vsn_growth", 1.3),
        "redis_growth": _at_most("redis_growth", 1.3),
        "dedupe_growth": _at_most("dedupe_growth", 1.3),
        "join_growth": _at_most("join_growth", 1.3),
        "ratio_large": _at_least("ratio_large", 1.2),
    },
    "rescale": {
        "epochs_to_apply": _at_most("epochs_to_apply", 1),
        "time_to_effect_s_p99": Target(
            "<= 2 x steady_epoch_s_p99 + 0.2",
            lambda r: r["time_to_effect_s_p99"] <= 2 * r["steady_epoch_s_p99"] + 0.2),
        "time_to_effect_target_met": _equal("time_to_effect_target_met", True),
        "speedup_time_to_effect": _at_least("speedup_time_to_effect", 10),
        "rescale_epoch_vs_same_parallelism_max": _at_most(
            "rescale_epoch_vs_same_parallelism_max", 1.1),
        "state_bytes_copied": _equal("state_bytes_copied", 0),
    },
    "control": {
        "api_to_pickup_ms_p99": _below("api_to_pickup_ms_p99", 40),
        "request_to_applied_ms_p99": _at_most("request_to_applied_ms_p99", 1500),
        "ws_delivery_ms_p99": _below("ws_delivery_ms_p99", 100),
    },
    "api": {
        "p99_ms": _below("p99_ms", 250),
        "run_keeps_up": _equal("run_keeps_up", True),
    },
    "autoscale": {
        "detect_epochs": _at_most("detect_epochs", 5),
        "decisions": _at_most("decisions", 2),
        "backlog_drained": _equal("backlog_drained", True),
        "flaps": _equal("flaps", 0),
        "calm_scale_ups": _equal("calm_scale_ups", 0),
        "calm_flaps": _equal("calm_flaps", 0),
        "calm_scale_downs": _at_most("calm_scale_downs", 1),
        "exact": _equal("exact", True),
    },
    # On a quiet 2-core machine.
    "recovery": {
        "kills": _at_least("kills", 5),
        "recover_s_p50": _at_most("recover_s_p50", 5),
        "recover_s_p99": _at_most("recover_s_p99", 15),
        "first_epoch_s_p50": _at_most("first_epoch_s_p50", 10),
        "collisions": _equal("collisions", 0),
        "exact": _equal("exact", True),
        "failed": _equal("failed", 0),
    },
}


@dataclass(frozen=True)
class Definitions:
    """What a bench measures, in its docstring's words: a headline and its figures."""

    headline: str
    figures: dict[str, str]


def bench_definitions(module: str, bench_dir: Path = BENCH_DIR) -> Definitions:
    """The headline (the docstring's first paragraph) and each figure's definition (the
    docstring's bullets that open with a figure's name in backticks) of ``bench/module.py``."""
    doc = ast.get_docstring(ast.parse((bench_dir / f"{module}.py").read_text())) or ""
    doc = doc.replace("``", "`")
    paragraphs = [" ".join(p.split()) for p in doc.split("\n\n") if p.strip()]
    headline = re.sub(r"^`[^`]+`:\s*", "", paragraphs[0]) if paragraphs else ""
    figures: dict[str, str] = {}
    for bullet in _bullets(doc):
        found = _FIGURE_BULLET.match(bullet)
        if found:
            figures[found.group(1)] = _first_sentence(found.group(2))
    return Definitions(headline, figures)


def _first_sentence(text: str) -> str:
    """A definition kept short: up to its first full stop."""
    return re.split(r"(?<=[a-z)`])\. ", text, maxsplit=1)[0].rstrip(";.")


def _bullets(doc: str) -> list[str]:
    """The docstring's bullets, each with its continuation lines joined."""
    bullets: list[str] = []
    in_bullet = False
    for line in doc.splitlines():
        if line.startswith("- "):
            bullets.append(line.strip())
            in_bullet = True
        elif in_bullet and line.startswith("  ") and line.strip():
            bullets[-1] += " " + line.strip()
        else:
            in_bullet = False
    return bullets


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text.replace("|", "\\|")


def _when(measured_at: str | None) -> str:
    if not measured_at:
        return "unknown"
    return datetime.fromisoformat(measured_at).strftime("%Y-%m-%d %H:%M UTC")


def flat_figures(result: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The result's figures, those of a nested row named ``row.figure``; not its context."""
    figures: dict[str, Any] = {}
    for name, value in result.items():
        if name in NOT_FIGURES:
            continue
        if isinstance(value, dict):
            figures.update(flat_figures(value, f"{prefix}{name}."))
        else:
            figures[prefix + name] = value
    return figures


def figure_rows(name: str, result: dict[str, Any]) -> list[str]:
    """The table's rows for one result: every figure but the bench's context."""
    targets = TARGETS.get(name, {})
    command = f"`{result.get('command', _command_of(name))}`"
    when = _when(result.get("measured_at"))
    rows = []
    for figure, value in flat_figures(result).items():
        target = targets.get(figure)
        met = ""
        if target is not None:
            try:
                met = "yes" if target.met(result) else "no"
            except (KeyError, TypeError):
                met = "?"
        rows.append(f"| {name} | `{figure}` | {_cell(value)} | "
                    f"{target.text if target else ''} | {met} | {command} | {when} |")
    return rows


def build_report(results_dir: Path = RESULTS_DIR, bench_dir: Path = BENCH_DIR) -> str:
    """``docs/benchmarks.md`` from every result in ``results_dir``."""
    results = results_load(results_dir)
    lines = [
        "# Benchmarks",
        "",
        "Built by `python -m bench report` from the results under `docs/benchmarks/results/`;",
        "do not edit it by hand. `python -m bench NAME` prints progress, then its figures as one",
        "line of JSON, which it also keeps in `docs/benchmarks/results/NAME.json` with when it",
        "was measured and the command that measured it. Both sides of a comparison are measured",
        "in the same run, on the same machine. The benches measure time: run each one alone.",
        "",
        "## Current figures",
        "",
    ]
    if results:
        lines += ["| benchmark | figure | value | target | met | command | measured |",
                  "|---|---|---|---|---|---|---|"]
        for name, result in results.items():
            lines += figure_rows(name, result)
    else:
        lines.append("No bench has written a result yet.")
    benches = {name: module for name, module in BENCHES.items()
               if (bench_dir / f"{module}.py").exists()}
    missing = [n for n in benches if n not in results]
    if missing:
        lines += ["", "Not measured yet:", ""]
        lines += [f"- `{_command_of(n)}`" for n in missing]
    lines += ["", "## What the figures mean", ""]
    for name, module in benches.items():
        lines += _definitions_section(name, bench_definitions(module, bench_dir))
    return "\n".join(lines).rstrip() + "\n"


def _command_of(name: str) -> str:
    bench, _, only = name.partition("-")
    return f"python -m bench {bench}" + (f" --only {only}" if only else "")


def _definitions_section(name: str, definitions: Definitions) -> list[str]:
    lines = [f"### {name}", "", f"`{_command_of(name)}`: {definitions.headline}", ""]
    lines += [f"- {figure}: {text}" for figure, text in definitions.figures.items()]
    return lines + ([""] if definitions.figures else [])


def write_report(results_dir: Path = RESULTS_DIR, path: Path = REPORT_PATH) -> Path:
    """Writes the report built from ``results_dir`` to ``path``."""
    path.write_text(build_report(results_dir))
    return path
