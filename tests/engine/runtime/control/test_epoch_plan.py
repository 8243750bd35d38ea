"""An epoch's plan and outcome in the epoch log: what the planner makes reads back equal, and
a file that does not read as one fails naming the file and the field (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.dag import parse_job_graph
from engine.planner import plan_job
from engine.runtime.control.epoch_plan import EpochOutcome, EpochPlan
from engine.runtime.control.messages import Command, CommandRequest
from engine.runtime.control.reconfigure import apply_commands
from engine.runtime.control.run_config import initial_config
from engine.runtime.driver.epoch_log import EpochLog
from engine.runtime.errors import MalformedPlan, failure_of
from engine.runtime.io.taken import ClockRange, EntriesTaken, FilesTaken
from tests.engine.runtime.jobs import window_job

OFFSET = {"op": "orders", "streams": {"orders-a": {"id": "1700-0", "n": 12}}}


def _plan() -> EpochPlan:
    """A plan as the planner makes one: the initial configuration with a rescale and a
    rejected rebalance applied, a take of every kind of source, watermarks and closes."""
    graph = parse_job_graph(window_job({"type": "sink.memory", "params": {}}))
    requests = [
        CommandRequest(kind="rescale", operator="counts", request_id="up", requested_at_ms=1.0,
                       parallelism=3),
        CommandRequest(kind="rebalance", operator="events", request_id="bad",
                       requested_at_ms=2.0, assignment="weighted"),
    ]
    commands = [Command.picked_up(r.to_message(), f"{i}-0", 5.0)
                for i, r in enumerate(requests, 1)]
    config, acks, stop = apply_commands(graph, initial_config(plan_job(graph)), commands, 7,
                                        {}, lambda *_: None)
    assert [a.status for a in acks] == ["applied", "rejected"]
    return EpochPlan(
        epoch=7, config=config, cursor="2-0", acks=tuple(acks), stop=stop,
        sources={"events": ClockRange(100, 250), "files": FilesTaken(("/in/a.json",)),
                 "orders": EntriesTaken({"op": "orders", "streams": {}}, OFFSET)},
        watermarks={"counts": 1_700_000_000_000_000, "other": None},
        closes={"counts": True},
    )


def test_a_plan_reads_back_equal_through_the_log(tmp_path: Path) -> None:
    log, plan = EpochLog(str(tmp_path)), _plan()
    log.write_plan(plan)
    assert log.plan(7) == plan
    assert log.latest_plan(before=8) == plan and log.latest_plan(before=7) is None
    assert log.files_taken("files") == {"/in/a.json"}
    assert EpochPlan.from_json(json.loads(json.dumps(plan.to_json()))) == plan


def test_an_outcome_reads_back_equal_and_the_plans_acks_count_once_it_ended(
    tmp_path: Path,
) -> None:
    log, plan = EpochLog(str(tmp_path)), _plan()
    log.write_plan(plan)
    assert log.ended_acks() == []
    outcome = EpochOutcome(max_event_us={"counts": 42, "idle": None},
                           kg_rows={"counts": [3, 0, 1]})
    log.write_outcome(7, outcome)
    assert log.outcome(7) == outcome
    [(epoch, acks, _)] = log.ended_acks()
    assert epoch == 7 and acks == list(plan.acks)


def _broken(change: Any) -> dict[str, Any]:
    doc = _plan().to_json()
    change(doc)
    return doc


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d.pop("config"), "config is missing"),
    (lambda d: d["config"]["counts"].update(parallelism="3"), "config.counts.parallelism"),
    (lambda d: d["config"]["counts"].pop("params"), "config.counts.params is missing"),
    (lambda d: d["config"]["counts"].update(owners=[0, "x"]), "config.counts.owners"),
    (lambda d: d["sources"].update(events=[1]), "sources.events"),
    (lambda d: d["sources"].update(files={"files": "a.json"}), "sources.files.files"),
    (lambda d: d["sources"]["orders"]["end"]["streams"].update({"orders-a": {"id": 1}}),
     "sources.orders.end.streams.orders-a"),
    (lambda d: d["watermarks"].update(counts=1.5), "watermarks.counts"),
    (lambda d: d["closes"].update(counts="yes"), "closes.counts"),
    (lambda d: d["acks"][1].pop("request_id"), "acks[1].request_id is missing"),
    (lambda d: d["acks"][0].update(status="done"), "acks[0].status"),
    (lambda d: d.update(epoch=None), "epoch must be an integer"),
    (lambda d: d.update(stop=1), "stop must be true or false"),
])
def test_a_malformed_plan_fails_naming_the_file_and_the_field(
    tmp_path: Path, change: Any, field: str
) -> None:
    log = EpochLog(str(tmp_path))
    (tmp_path / f"{7:012d}.plan.json").write_text(json.dumps(_broken(change)))
    with pytest.raises(MalformedPlan) as caught:
        log.plan(7)
    assert f"{7:012d}.plan.json: " in str(caught.value)
    assert field in str(caught.value)
    assert not failure_of(caught.value).retried  # the log is the run's: it recurs


def test_a_plan_that_is_not_json_fails_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / f"{3:012d}.outcome.json").write_text('{"max_event_us": ')
    with pytest.raises(MalformedPlan, match=r"000000000003\.outcome\.json: not JSON"):
        EpochLog(str(tmp_path)).outcome(3)
