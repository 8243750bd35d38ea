"""A run recorded as running with epochs fed by the test instead of a Spark driver: for the run
page's size and speed checks (10 operators, an hour of 1-second epochs) and for development.

Epochs go through the same path a driver's do (`run_epoch_publish`), so the page receives them
over the websocket exactly as in production."""

from __future__ import annotations

import copy
import math
from datetime import timedelta
from typing import Any

TEN_OPERATORS = {
    "name": "ten-operators",
    "key_groups": 64,
    "operators": [
        {"id": "events", "type": "source.generator",
         "params": {"rows_per_second": 20000, "keys": 5000}},
        {"id": "clean", "type": "filter", "params": {"condition": "campaign_id IS NOT NULL"}},
        {"id": "shape", "type": "map", "params": {"columns": {"amount2": "amount * 2"}}},
        {"id": "views", "type": "filter", "params": {"condition": "event_type = 'view'"}},
        {"id": "counts", "type": "window_aggregate", "parallelism": 2,
         "params": {"key": ["campaign_id"], "time": "event_time", "window": "10 seconds",
                    "watermark": "5 seconds", "aggregates": {"views": "count(*)"}}},
        {"id": "hot", "type": "filter", "params": {"condition": "views > 100"}},
        {"id": "out", "type": "sink.memory", "params": {"name": "counts_out"}},
        {"id": "alerts", "type": "sink.memory", "params": {"name": "alerts_out"}},
        {"id": "uniq", "type": "dedupe",
         "params": {"key": ["user_id"], "time": "event_time", "within": "1 minute"}},
        {"id": "users", "type": "sink.memory", "params": {"name": "users_out"}},
    ],
    "edges": [
        {"from": "events", "to": "clean"}, {"from": "clean", "to": "shape"},
        {"from": "shape", "to": "views"}, {"from": "views", "to": "counts"},
        {"from": "counts", "to": "hot"}, {"from": "counts", "to": "out"},
        {"from": "hot", "to": "alerts"}, {"from": "shape", "to": "uniq"},
        {"from": "uniq", "to": "users"},
    ],
}


def fake_run_create(*, dag: dict[str, Any] | None = None, name: str | None = None, actor=None):
    """A job (new version if it exists) and a run of it marked running, without a driver."""
    from webapp import engine_gateway
    from webapp.jobs.models import Job, Run, RunStatus, Trigger
    from webapp.jobs.services import job_create, job_version_create

    document = copy.deepcopy(dag or TEN_OPERATORS)
    document["name"] = name or document["name"]
    job = Job.objects.filter(name=document["name"]).first()
    if job is None:
        version = job_create(dag=document, actor=actor, trigger=Trigger.USER, comment="fake run")
    else:
        version = job_version_create(job_id=job.pk, dag=document, base_version=job.latest_version,
                                     actor=actor, trigger=Trigger.USER, comment="fake run")
    return Run.objects.create(
        job=version.job, version=version, status=RunStatus.RUNNING, spark_master="local[2]",
        checkpoint_location="/nonexistent",
        parallelism=engine_gateway.dag_parallelism(version.dag), target_dag=version.dag,
        current_epoch=None,
    )


def key_group_weights(key_groups: int) -> list[float]:
    """How the fake's rows fall on key groups: the lower ones hotter, as a skewed key."""
    return [1.0 / (1.0 + kg / 8.0) for kg in range(key_groups)]


def _rows_per_instance(rows: int, ranges: list[list[int]], weights: list[float],
                       count: int) -> list[int]:
    """A keyed operator's rows per instance when its key groups carry `weights`."""
    share = [0.0] * count
    for first, last, instance in ranges:
        if instance < count:
            share[instance] += sum(weights[first:last + 1])
    return [round(rows * s / sum(weights)) for s in share]


def synthetic_epoch(document: dict[str, Any], epoch: int, *,
                    instances: dict[str, int] | None = None,
                    base_rate: float = 20000.0,
                    assignment: dict[str, list[list[int]]] | None = None) -> dict[str, Any]:
    """Plausible per-operator figures for one epoch: a wave on the source rate, the keyed
    operator congested at 2 instances, selectivity along the graph. With the keyed operators'
    key-group ranges (`assignment`), their rows per instance as a driver reports them."""
    instances = instances or {}
    rate = base_rate * (1.0 + 0.15 * math.sin(epoch / 30.0))
    parents = {}
    for e in document["edges"]:
        parents.setdefault(e["to"], []).append(e["from"])
    out_rate: dict[str, float] = {}
    operators = {}
    for op in document["operators"]:  # documents list operators in topological order here
        n = instances.get(op["id"], op.get("parallelism", 1))
        rate_in = None if op["id"] not in parents else sum(out_rate[p] for p in parents[op["id"]])
        keyed = op["type"] in ("window_aggregate", "dedupe")
        capacity = (9000.0 if keyed else 60000.0) * n
        if rate_in is None:
            out = rate
        else:
            out = rate_in * {"filter": 0.6, "window_aggregate": 0.02, "dedupe": 0.5}.get(
                op["type"], 1.0)
        out_rate[op["id"]] = out
        busy = 1000.0 * min(1.0, (rate_in or rate) / capacity)
        operators[op["id"]] = {
            "instances": n, "rows_in": int(rate_in or 0), "rows_out": int(out),
            "busy_ms": [round(busy * (0.9 + 0.1 * i / max(n, 1)), 1) for i in range(n)],
            "input_rate": rate_in, "processing_rate": capacity, "output_rate": out,
            "congested": rate_in is not None and rate_in > 1.2 * capacity,
            "etp": 0.5 if keyed and rate_in and rate_in > 1.2 * capacity else 1.0,
        }
        if assignment and op["id"] in assignment:
            operators[op["id"]]["rows_in_per_instance"] = _rows_per_instance(
                int(rate_in or 0), assignment[op["id"]],
                key_group_weights(document["key_groups"]), n)
    latency = 600.0 + 200.0 * math.sin(epoch / 17.0)
    metrics = {"epoch": epoch, "batch_duration_ms": 1000.0, "interval_ms": 1000.0,
               "backlog_rows": int(rate * 0.05),
               "latency_ms": {"p50": latency, "p99": latency * 2.1, "max": latency * 2.5},
               "operators": operators}
    _judged_as_a_driver_does(document, metrics)
    return metrics


def _judged_as_a_driver_does(document: dict[str, Any], metrics: dict[str, Any]) -> None:
    """Congestion, ETP and the bottleneck from the engine's load model of the epoch, as a
    driver publishes them (engine.runtime.driver.metrics), so the graph's colours, the
    previews and the policies judge the same figures."""
    from engine.api import stored_job_graph
    from engine.policies.load import load_model

    graph = stored_job_graph(document)
    model = load_model(graph, [metrics])
    for op_id, values in metrics["operators"].items():
        unit = model.unit_of(op_id)
        values["congested"] = bool(unit is not None and unit.congested)
        values["etp"] = round(model.etp.get(op_id, 0.0), 4)
    congested = model.congested_units()
    metrics["bottleneck"] = congested[0].unit_id if congested else None


def fake_history_fill(*, run, epochs: int, end=None) -> None:
    """`epochs` 1-second epochs ending now, written in bulk (no live events)."""
    from django.utils import timezone

    from webapp.jobs.models import OperatorEpoch, Run, RunEpoch

    end = end or timezone.now()
    runs, operators = [], []
    for epoch in range(1, epochs + 1):
        at = end - timedelta(seconds=epochs - epoch)
        m = synthetic_epoch(run.target_dag, epoch)
        ops = m["operators"]
        runs.append(RunEpoch(
            run_id=run.pk, epoch=epoch, recorded_at=at, batch_duration_ms=m["batch_duration_ms"],
            backlog_rows=m["backlog_rows"], rows_in=sum(o["rows_in"] for o in ops.values()),
            rows_out=sum(o["rows_out"] for o in ops.values()),
            latency_p50_ms=m["latency_ms"]["p50"], latency_p99_ms=m["latency_ms"]["p99"],
            latency_max_ms=m["latency_ms"]["max"]))
        operators.extend(OperatorEpoch(
            run_id=run.pk, epoch=epoch, operator_id=op_id, recorded_at=at,
            instances=op["instances"], rows_in=op["rows_in"], rows_out=op["rows_out"],
            busy_ms=op["busy_ms"], input_rate=op["input_rate"],
            processing_rate=op["processing_rate"], output_rate=op["output_rate"],
            congested=op["congested"], etp=op["etp"]) for op_id, op in ops.items())
    RunEpoch.objects.bulk_create(runs, batch_size=2000)
    OperatorEpoch.objects.bulk_create(operators, batch_size=5000)
    Run.objects.filter(pk=run.pk).update(current_epoch=epochs or None)


def fake_epoch_publish(*, run_id: int, epoch: int) -> None:
    """One epoch through the driver's publishing path, with the run's acknowledged instances."""
    from webapp import engine_gateway
    from webapp.jobs.models import Run
    from webapp.runs.live import run_epoch_publish

    run = Run.objects.get(pk=run_id)
    assignment = {**engine_gateway.dag_assignment(run.target_dag), **(run.assignment or {})}
    run_epoch_publish(run_id=run_id, metrics=synthetic_epoch(
        run.target_dag, epoch, instances=run.parallelism, assignment=assignment))


def fake_commands_apply(*, run_id: int, epoch: int, cursor: str | None) -> str | None:
    """Acknowledge every command sent to the run since `cursor` as applied at `epoch`, as a
    driver does at an epoch boundary; returns the new cursor."""
    from django.conf import settings

    from engine.api import Ack
    from engine.runtime.control.channel import open_control_channel
    from webapp.engine_gateway import CONTROL_PREFIX
    from webapp.reconfigurations.services import reconfiguration_acknowledge

    channel = open_control_channel(settings.REDIS_URL, str(run_id), CONTROL_PREFIX)
    for entry_id, fields in channel.read_after(cursor, 0):
        cursor = entry_id
        if fields.get("kind") == "stop":
            continue
        after = _installed(run_id, fields)
        reconfiguration_acknowledge(run_id=run_id, ack=Ack(
            request_id=fields["request_id"], kind=fields.get("kind"),
            operator=fields.get("operator"), status="applied", applied_epoch=epoch,
            control_latency_ms=14.0, state_bytes_copied=0, after=after))
    return cursor


def _installed(run_id: int, fields: dict[str, str]) -> dict:
    """What a driver reports it installed for a command (its ack's `after`)."""
    import json

    from engine.mapping import Assignment, balanced_assignment, weighted_assignment
    from webapp import engine_gateway
    from webapp.jobs.models import Run

    run = Run.objects.get(pk=run_id)
    operator, kind = fields.get("operator") or "", fields.get("kind")
    after = {"parallelism": run.parallelism.get(operator, 1)}
    key_groups = run.target_dag["key_groups"]
    keyed = operator in engine_gateway.dag_assignment(run.target_dag)
    if kind == "rescale":
        after["parallelism"] = int(fields["parallelism"])
        if keyed:  # a keyed operator's key groups are spread evenly over its new instances
            after["ranges"] = [list(r) for r in balanced_assignment(
                key_groups, after["parallelism"]).ranges()]
    if kind == "logic":
        after["params"] = json.loads(fields["params"])
    if kind == "rebalance":
        # Weighted by the rows each key group had, as a driver weighs them.
        if fields.get("assignment") in (None, "", "weighted"):
            owners = weighted_assignment(key_group_weights(key_groups), after["parallelism"])
        else:
            given = json.loads(fields["assignment"])
            owners = Assignment(key_groups, given, max(given) + 1)
            after["parallelism"] = owners.parallelism
        after["ranges"] = [list(r) for r in owners.ranges()]
    return after


def feed(*, run_id: int, period_s: float = 1.0) -> None:
    """Publish one epoch a period and apply reconfigurations, as a driver does, until the run
    leaves the running state."""
    import time

    from webapp.jobs.models import Run, RunStatus

    run = Run.objects.get(pk=run_id)
    epoch, cursor = run.current_epoch or 0, None
    while Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).exists():
        epoch += 1
        cursor = fake_commands_apply(run_id=run_id, epoch=epoch, cursor=cursor)
        fake_epoch_publish(run_id=run_id, epoch=epoch)
        time.sleep(period_s)


DRIVER_OUTPUT = ("Traceback (most recent call last):\n  File \"pipeline.py\", line 88, in run\n"
                 "pyspark.errors.exceptions.captured.ParseException: [PARSE_SYNTAX_ERROR] "
                 "Syntax error at or near ';'")


def fake_run_fail(*, run_id: int) -> None:
    """One restart, then the failure, as the driver's watcher records them."""
    from webapp.jobs.models import RunStatus
    from webapp.runs.services import run_status_set

    cause = "the query failed: ParseException: syntax error at or near ';'"
    run_status_set(run_id=run_id, status=RunStatus.RECOVERING, output=DRIVER_OUTPUT,
                   detail=f"driver 4101 exited with code 1: {cause}; restarting from the "
                          "checkpoint")
    run_status_set(run_id=run_id, status=RunStatus.FAILED, output=DRIVER_OUTPUT,
                   detail=f"driver 4102 exited with code 1: {cause}; 6 crashes, more than the "
                          "5 restarts allowed within 10 minutes")


def main(argv: list[str]) -> None:
    """`python -m tests.browser.fake_run create [HISTORY_EPOCHS [JOB_NAME]]` prints
    `RUN_ID JOB_ID` of a new ten-operator run with that much history; `... feed RUN_ID`
    publishes its epochs; `... fail RUN_ID` records a restart and then the run's failure;
    `... demo [HISTORY_EPOCHS]` does both create and feed (for development)."""
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    django.setup()
    command, rest = argv[0], argv[1:]
    if command in ("create", "demo"):
        run = fake_run_create(name=rest[1] if len(rest) > 1 else None)
        fake_history_fill(run=run, epochs=int(rest[0]) if rest else 0)
        print(f"{run.pk} {run.job_id}", flush=True)
        if command == "demo":
            feed(run_id=run.pk)
    elif command == "feed":
        feed(run_id=int(rest[0]))
    elif command == "fail":
        fake_run_fail(run_id=int(rest[0]))
    else:
        raise SystemExit(f"unknown command {command!r}: use create, feed, fail or demo")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
