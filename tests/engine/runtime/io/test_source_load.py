"""Clock sources: rows due by the wall clock, a cap per epoch, backlog and its growth."""

from __future__ import annotations

from engine.dag import parse_job_graph
from engine.planner import plan_job
from engine.runtime.control.messages import Command
from engine.runtime.control.run_config import apply_command, initial_config
from engine.runtime.errors import CommandRejected
from engine.runtime.io.source_load import ClockSource, SourceLoad, source_figures


def test_an_epoch_takes_what_is_due_up_to_the_cap():
    clock = ClockSource.from_params({"rows_per_second": 1000, "max_rows_per_epoch": 1500},
                                    start_ms=0, epoch_ms=1000, back_to_back=False)
    assert clock.due(2_500) == 2500
    assert clock.take(0, 1_000) == (0, 1000)  # keeping up: everything due
    assert clock.take(1000, 5_000) == (1000, 2500)  # behind: at most the cap
    clock.took(2500, 1500)
    assert clock.offered(3, 5_000) == SourceLoad(5000, 2500)
    assert clock.offered(3, 5_000).backlog == 2500


def test_the_default_cap_is_two_seconds_of_the_rate_and_back_to_back_is_saturating():
    clock = ClockSource.from_params({"rows_per_second": 1000}, 0, 1000, back_to_back=False)
    assert clock.cap_rows == 2000
    saturating = ClockSource.from_params({"rows_per_second": 1000}, 0, 500, back_to_back=True)
    assert saturating.take(700, 10**9) == (700, 1200)  # half a second of rows, clock or not


def test_figures_give_offered_rate_as_consumption_plus_backlog_growth():
    before, now = SourceLoad(10_000, 8_000), SourceLoad(13_000, 9_000)
    figures = source_figures(before, now, period_ms=1000)
    assert figures["offered"] == 3000 and figures["consumed"] == 1000
    assert figures["backlog"] == 4000 and figures["backlog_growth_per_s"] == 2000.0
    assert figures["offered_rate"] == figures["consumed_rate"] + figures["backlog_growth_per_s"]


def _rescale(op: str, n: int) -> Command:
    return Command(cursor="1-0", request_id="r", kind="rescale", operator=op, parallelism=n,
                   assignment=None, params=None, requested_at_ms=0.0, picked_up_at_ms=0.0)


def test_a_clock_source_rescales_live_and_a_files_source_says_why_not(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMSCALE_DATA_DIR", str(tmp_path))
    graph = parse_job_graph({
        "name": "two-sources",
        "operators": [
            {"id": "gen", "type": "source.generator", "params": {"rows_per_second": 10}},
            {"id": "files", "type": "source.files",
             "params": {"path": "in", "format": "json",
                        "schema": {"event_time": "timestamp", "campaign_id": "long"}}},
            {"id": "out", "type": "sink.memory", "params": {}},
            {"id": "out2", "type": "sink.memory", "params": {}},
        ],
        "edges": [{"from": "gen", "to": "out"}, {"from": "files", "to": "out2"}],
    })
    config = initial_config(plan_job(graph))
    rescaled = apply_command(graph, config, _rescale("gen", 2), {}, lambda *_: None)
    assert rescaled["gen"].parallelism == 2
    try:
        apply_command(graph, config, _rescale("files", 2), {}, lambda *_: None)
    except CommandRejected as refused:
        assert "partitions are those Spark reads its data in" in str(refused)
    else:
        raise AssertionError("a files source was rescaled")
