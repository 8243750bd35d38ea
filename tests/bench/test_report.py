"""``python -m bench report`` builds docs/benchmarks.md from the results the benches keep: one
row per figure with its target, command and time of measurement, and each bench's
definitions from its docstring."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from bench.report import BENCHES, bench_definitions, build_report, write_report
from bench.results import bench_command, result_name, result_record, result_save, results_load

MEASURED = datetime(2026, 11, 28, 15, 21, 7, tzinfo=UTC)


def _keep(folder: Path, name: str, figures: dict, command: str) -> None:
    result_save(result_record(figures, command=command, measured_at=MEASURED), name=name,
                folder=folder)


def _rows(report: str) -> dict[tuple[str, str], list[str]]:
    rows = {}
    for line in report.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 7 and cells[1].startswith("`"):
            rows[(cells[0], cells[1].strip("`"))] = cells[2:]
    return rows


def test_a_result_keeps_its_figures_with_when_and_how_it_was_measured(tmp_path: Path) -> None:
    command = bench_command(["rescale", "--window", "1 hour"])
    _keep(tmp_path, result_name("rescale"), {"epochs_to_apply": 1}, command)

    kept = results_load(tmp_path)

    assert command == "python -m bench rescale --window '1 hour'"
    assert kept == {"rescale": {"epochs_to_apply": 1, "measured_at": "2026-11-28T15:21:07+00:00",
                                "command": command}}
    assert result_name("throughput", "redis_stream") == "throughput-redis_stream"


def test_the_report_has_a_row_per_figure_with_target_command_and_time(tmp_path: Path) -> None:
    _keep(tmp_path, "rescale", {
        "epochs_to_apply": 1, "time_to_effect_s_p99": 2.5, "steady_epoch_s_p99": 1.0,
        "speedup_time_to_effect": 12.0, "restart_samples": [6.1, 5.2],
        "context": {"noise": [1, 2, 3]},
    }, "python -m bench rescale")
    _keep(tmp_path, "throughput", {"ratio": 1.4, "redis_stream": {"redis_vs_generator": 0.2}},
          "python -m bench throughput")

    rows = _rows(build_report(tmp_path))

    when = "2026-11-28 15:21 UTC"
    assert rows[("rescale", "epochs_to_apply")] == [
        "1", "<= 1", "yes", "`python -m bench rescale`", when]
    assert rows[("rescale", "time_to_effect_s_p99")][:3] == [
        "2.5", "<= 2 x steady_epoch_s_p99 + 0.2", "no"]
    assert rows[("rescale", "speedup_time_to_effect")][1:3] == [">= 10", "yes"]
    assert rows[("rescale", "restart_samples")][:3] == ["[6.1, 5.2]", "", ""]
    assert rows[("throughput", "ratio")][:3] == ["1.4", ">= 1.5", "no"]
    assert rows[("throughput", "redis_stream.redis_vs_generator")][0] == "0.2"
    assert not any(figure.startswith("context") or figure in ("measured_at", "command")
                   for _, figure in rows)


def test_the_report_names_the_benches_not_measured_yet(tmp_path: Path) -> None:
    _keep(tmp_path, "rescale", {"epochs_to_apply": 1}, "python -m bench rescale")

    report = build_report(tmp_path)

    assert "- `python -m bench throughput --only redis_stream`" in report
    assert "- `python -m bench rescale`\n" not in report
    assert "No bench has written a result yet." in build_report(tmp_path / "none")


def test_each_bench_is_defined_from_its_docstring() -> None:
    for module in BENCHES.values():
        assert bench_definitions(module).headline, module
    rescale = bench_definitions("rescale")
    assert "time_to_effect_s" in " ".join(rescale.figures)
    assert all("``" not in text for text in rescale.figures.values())


def test_a_bench_whose_module_is_gone_is_left_out(tmp_path: Path) -> None:
    bench_dir = tmp_path / "bench"
    bench_dir.mkdir()
    (bench_dir / "rescale.py").write_text('"""``python -m bench rescale``: rescales.\n\n'
                                          '- ``epochs_to_apply``: epochs until it applies."""\n')

    report = build_report(tmp_path / "results", bench_dir)

    assert "### rescale" in report and "### throughput" not in report
    assert "- `epochs_to_apply`: epochs until it applies" in report
    assert "`python -m bench throughput`" not in report


def test_write_report_replaces_the_file(tmp_path: Path) -> None:
    _keep(tmp_path, "control", {"ws_delivery_ms_p99": 120.0}, "python -m bench control")
    path = tmp_path / "benchmarks.md"
    path.write_text("an old lab notebook\n")

    write_report(tmp_path, path)

    text = path.read_text()
    assert text.startswith("# Benchmarks\n") and "lab notebook" not in text
    assert "| control | `ws_delivery_ms_p99` | 120.0 | < 100 | no |" in text


def test_the_api_reads_are_held_to_their_latency_and_to_the_run_keeping_up(
        tmp_path: Path) -> None:
    _keep(tmp_path, "api", {"p99_ms": 249.9, "run_keeps_up": False}, "python -m bench api")

    rows = _rows(build_report(tmp_path))

    assert rows[("api", "p99_ms")][:3] == ["249.9", "< 250", "yes"]
    assert rows[("api", "run_keeps_up")][:3] == ["false", "true", "no"]
