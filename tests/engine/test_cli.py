"""``python -m engine`` on the example files and on bad input, as a user runs it."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.cli import main
from tests.engine.builders import CAMPAIGN_VIEWS, EXAMPLES

ROOT = EXAMPLES.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m engine ARGS`` in this process: each process starts its own JVM for Spark's
    expression parser, so the commands share the test process's (one test below runs the
    real command line)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 2
    return subprocess.CompletedProcess(["engine", *args], code, out.getvalue(), err.getvalue())


def test_the_command_line_runs_as_a_program() -> None:
    example = str(EXAMPLES / "campaign_views.json")
    done = subprocess.run([sys.executable, "-m", "engine", "validate", example],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)


@pytest.mark.parametrize("command", [
    ["etp", "campaign_views.json", "campaign_views_rates.json"],
    ["scale-out", "campaign_views.json", "campaign_views_rates.json", "--instances", "2"],
    ["recommend", "campaign_views.json", "campaign_views_rates.json"],
])
def test_the_policies_answer_without_starting_spark(command: list[str]) -> None:
    # The job has a filter expression: checking it would start Spark's SQL parser (a JVM).
    args = [str(EXAMPLES / a) if a.endswith(".json") else a for a in command]
    code = ("import runpy, sys; sys.argv = ['engine', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('engine', run_name='__main__')\n"
            "except SystemExit as end:\n    assert not end.code, end.code\n"
            "loaded = [m for m in sys.modules if m.startswith(('pyspark', 'py4j'))]\n"
            "assert not loaded, loaded")
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)


def test_the_policies_still_refuse_a_graph_whose_structure_is_wrong(tmp_path: Path) -> None:
    doc = json.loads((EXAMPLES / "campaign_views.json").read_text())
    doc["operators"].append({"id": "orphan", "type": "no_such_type", "params": {}})
    lines = fails("etp", write(tmp_path, "dag.json", doc), "examples/campaign_views_rates.json")
    assert any("orphan" in line and "unknown type 'no_such_type'" in line for line in lines)


def ok(*args: str) -> Any:
    done = run(*args)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return json.loads(done.stdout)


def fails(*args: str) -> list[str]:
    done = run(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines
    return lines


def write(tmp_path: Path, name: str, content: Any) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def test_validate_and_plan() -> None:
    assert ok("validate", "examples/campaign_views.json")["valid"] is True
    plan = ok("plan", "examples/campaign_views.json")
    routing = {tuple(r["operators"]): r["routing"] for r in plan["regions"]}
    assert routing[("counts",)] == "key_group"
    assert routing[("views",)] == "round_robin"


def test_etp_shape() -> None:
    answer = ok("etp", "examples/stela_topology.json", "examples/stela_rates.json")
    assert set(answer) == {"etp", "congested"}
    assert answer["etp"]["o3"] == pytest.approx(0.444, abs=1e-3)
    assert answer["etp"]["o6"] == pytest.approx(0.111, abs=1e-3)
    assert answer["congested"] == ["o3", "o4", "o6"]


def test_scale_out_scale_in_and_recommend() -> None:
    out = ok("scale-out", "examples/stela_topology.json", "examples/stela_rates.json",
             "--instances", "1")
    assert out == {"parallelism": {f"o{i}": 2 if i == 3 else 1 for i in range(1, 11)},
                   "steps": ["o3"]}
    scaled_in = ok("scale-in", "examples/stela_topology.json", "examples/stela_rates.json",
                   "--placement", "examples/stela_placement.json", "--machines", "1")
    assert scaled_in["removed"] == ["m2"]
    assert scaled_in["placement"]["m1"][-2:] == ["o2", "o6"]
    assert ok("recommend", "examples/ds2_chain.json", "examples/ds2_rates.json") == {
        "parallelism": {"op1": 2, "op2": 8}}
    assert ok("recommend", "examples/ds2_chain.json", "examples/ds2_rates.json",
              "--target-rate", "200") == {"parallelism": {"op1": 4, "op2": 16}}


@pytest.mark.parametrize("command", ["", "validate", "plan", "etp", "scale-out", "scale-in",
                                     "recommend"])
def test_help(command: str) -> None:
    done = run(*([command] if command else []), "--help")
    assert done.returncode == 0
    assert "usage: python -m engine" in done.stdout


def test_missing_file_and_not_json(tmp_path: Path) -> None:
    assert fails("validate", str(tmp_path / "nope.json")) == [
        f"{tmp_path / 'nope.json'}: cannot read file: No such file or directory"]
    bad = write(tmp_path, "bad.json", "{not json")
    [line] = fails("plan", bad)
    assert line.startswith(f"{bad}: not valid JSON:")


def test_wrong_shape_and_every_problem_on_its_own_line(tmp_path: Path) -> None:
    assert fails("validate", write(tmp_path, "list.json", [1, 2])) == [
        f"{tmp_path / 'list.json'}: document: must be a JSON object, got a list"]
    doc = json.loads(json.dumps(CAMPAIGN_VIEWS))
    doc["operators"][1]["params"] = {}
    doc["operators"][2]["parallelism"] = 1000
    lines = fails("validate", write(tmp_path, "dag.json", doc))
    assert len(lines) == 2
    assert any("operator 'views': missing required param 'condition'" in x for x in lines)
    assert any("operator 'counts': parallelism 1000 is above key_groups" in x for x in lines)


def test_cycle(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(CAMPAIGN_VIEWS))
    doc["edges"].append({"from": "counts", "to": "views"})
    lines = fails("plan", write(tmp_path, "cycle.json", doc))
    assert any("is on a cycle: views -> counts -> views" in line for line in lines)


def test_rates_problems(tmp_path: Path) -> None:
    rates = json.loads((EXAMPLES / "campaign_views_rates.json").read_text())
    rates["ghost"] = {"output_rate": 1}
    rates["views"]["processing_rate"] = -5
    path = write(tmp_path, "rates.json", rates)
    lines = fails("etp", "examples/campaign_views.json", path)
    assert f"{path}: rates of operator 'ghost': unknown operator id (not in the job graph)" \
        in lines
    assert any("'processing_rate' must be >= 0" in line for line in lines)
    assert fails("recommend", "examples/campaign_views.json",
                 write(tmp_path, "num.json", "42"))[0].endswith("must be a JSON object of "
                                                                "operator id -> rates")


def test_bad_arguments_and_limits(tmp_path: Path) -> None:
    [line] = fails("scale-out", "examples/stela_topology.json", "examples/stela_rates.json",
                   "--instances", "many")
    assert "--instances" in line
    [line] = fails("scale-in", "examples/stela_topology.json", "examples/stela_rates.json",
                   "--placement", "examples/stela_placement.json", "--machines", "3")
    assert line == "scale-in: can remove 1..2 of 3 machines, not 3"
    placement = write(tmp_path, "p.json", {"m1": ["o1", "nobody"], "m2": "o2"})
    lines = fails("scale-in", "examples/stela_topology.json", "examples/stela_rates.json",
                  "--placement", placement, "--machines", "1")
    assert len(lines) == 2
    assert fails("frobnicate")[0].startswith("python -m engine: argument COMMAND")
