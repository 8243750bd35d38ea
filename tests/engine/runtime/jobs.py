"""Job documents and the results they must produce, computed straight from the
generator's definition (a batch query over the same event ids), not by the runtime."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench.workload import chain_job, views_filter, window_count
from engine.runtime.api import start_run
from engine.runtime.driver.job_run import JobRun
from engine.runtime.driver.metrics import CollectingPublisher, CollectingRecorder
from engine.runtime.io.sources import GeneratorSpec, generator_rows


def wait_epoch(run: Any, epoch: int, timeout_s: float = 120.0) -> None:
    """Waits until ``run`` (a JobRun) has finished ``epoch``; fails on a run failure."""
    deadline = time.monotonic() + timeout_s
    while (-1 if run.last_epoch is None else run.last_epoch) < epoch:
        assert time.monotonic() < deadline, f"epoch {epoch} not reached"
        assert run.failure() is None, run.failure()
        time.sleep(0.05)
    run.flush()  # its acks and metrics reach the host off the epoch's path


def start_collected_run(
    spark: SparkSession, tmp_path: Any, job: dict[str, Any], last_epoch: int
) -> tuple[JobRun, CollectingPublisher, CollectingRecorder]:
    """``job`` run in this process on ``spark``, an epoch a second, until ``last_epoch``;
    with the publisher and the recorder that collect its metrics and acknowledgements."""
    publisher, recorder = CollectingPublisher(), CollectingRecorder()
    run = start_run(
        job,
        checkpoint=str(tmp_path / "ckpt"),
        publisher=publisher,
        recorder=recorder,
        spark=spark,
        epoch_ms=1000,
        trigger_ms=0,
        stop_after_epoch=last_epoch,
    )
    return run, publisher, recorder


ROWS_PER_SECOND = 4000
KEYS = 500
# The generator of the test jobs; the expected rows are computed from the same params.
GENERATOR_PARAMS = {"rows_per_second": ROWS_PER_SECOND, "keys": KEYS, "seed": 7}
WINDOW_S = 4
WATERMARK_S = 1
AGGREGATES = {"views": "count(*)", "users": "sum(user_id)", "top": "max(amount)"}


def generator() -> dict[str, Any]:
    """The test jobs' ``events`` operator: the generator with ``GENERATOR_PARAMS``."""
    return {"id": "events", "type": "source.generator", "params": GENERATOR_PARAMS}


def window_job(
    sink: dict[str, Any],
    parallelism: int = 2,
    condition: str = "event_type = 'view'",
    key_groups: int = 32,
    slide_s: int | None = None,
) -> dict[str, Any]:
    """generator -> filter -> window_aggregate (tumbling, or sliding by ``slide_s``) -> sink."""
    counts = window_count(
        parallelism,
        window=f"{WINDOW_S} seconds",
        watermark=f"{WATERMARK_S} seconds",
        aggregates=AGGREGATES,
        slide=None if slide_s is None else f"{slide_s} seconds",
    )
    return chain_job(
        "runtime-test",
        [generator(), views_filter(condition), counts, {"id": "out", **sink}],
        key_groups=key_groups,
    )


def expected_windows(
    spark: SparkSession,
    start_ms: int,
    last_epoch: int,
    conditions: list[tuple[int, str]],
    slide_s: int | None = None,
) -> dict[tuple[int, int], tuple]:
    """Windows a run stopped after ``last_epoch`` has emitted, keyed (campaign, start us).

    ``conditions``: (first epoch, filter condition) in order; one epoch is one second of
    event time. Windows close once the watermark (max filtered event time before the
    last epoch minus the delay) reaches their end.
    """
    spec = GeneratorSpec.from_params(GENERATOR_PARAMS, start_ms)
    rows = generator_rows(spark, spec, 0, (last_epoch + 1) * ROWS_PER_SECOND, 2)
    kept = None
    bounds = [*[c[0] for c in conditions[1:]], last_epoch + 1]
    for (first, condition), end in zip(conditions, bounds, strict=True):
        part = rows.where(
            (F.col("event_id") >= first * ROWS_PER_SECOND)
            & (F.col("event_id") < end * ROWS_PER_SECOND)
        ).where(F.expr(condition))
        kept = part if kept is None else kept.unionByName(part)
    assert kept is not None
    before_last = kept.where(F.col("event_id") < last_epoch * ROWS_PER_SECOND)
    max_us = before_last.agg(F.max(F.unix_micros("event_time"))).collect()[0][0]
    return _windows_closed(kept, max_us - WATERMARK_S * 1_000_000, slide_s)


def _windows_closed(rows: Any, watermark_us: int, slide_s: int | None = None) -> dict[
        tuple[int, int], tuple]:
    """The windows of ``rows`` (a DataFrame) that ``watermark_us`` closed, keyed (campaign,
    start us): views, users and top, as the test jobs' window aggregate computes them."""
    grouped = (
        rows.groupBy(
            "campaign_id",
            F.window("event_time", f"{WINDOW_S} seconds", f"{slide_s or WINDOW_S} seconds"),
        )
        .agg(
            F.count(F.lit(1)).alias("views"),
            F.sum("user_id").alias("users"),
            F.max("amount").alias("top"),
        )
        .where(F.unix_micros("window.end") <= watermark_us)
    )
    return {
        (r["campaign_id"], r["start"]): (r["views"], r["users"], r["top"])
        for r in grouped.select(
            "campaign_id", F.unix_micros("window.start").alias("start"), "views", "users", "top"
        ).collect()
    }


def expected_windows_planned(
    spark: SparkSession, checkpoint: str, last_epoch: int, condition: str
) -> dict[tuple[int, int], tuple]:
    """Windows a run whose rows fell due by the wall clock has emitted by ``last_epoch``: the
    rows are those the epochs' logged plans took (``[0, end)`` of the generator ``events``),
    the windows those the last epoch's watermark closed."""
    import json
    import os

    from engine.runtime.driver.epoch_log import EpochLog
    from engine.runtime.io.taken import ClockRange

    with open(os.path.join(checkpoint, "run.json"), encoding="utf-8") as handle:
        start_ms = json.load(handle)["start_ms"]
    plan = EpochLog(os.path.join(checkpoint, "epochs")).plan(last_epoch)
    assert plan is not None, f"no plan for epoch {last_epoch}"
    events = plan.sources["events"]
    assert isinstance(events, ClockRange)
    end, watermark = events.end, plan.watermarks["counts"]
    spec = GeneratorSpec.from_params(GENERATOR_PARAMS, start_ms)
    assert watermark is not None, "the last epoch has no watermark"
    return _windows_closed(generator_rows(spark, spec, 0, end, 2).where(F.expr(condition)),
                           watermark)


def actual_windows(table: pa.Table | None) -> dict[tuple[int, int], tuple]:
    """Sink rows keyed like ``expected_windows``; a doubled window fails the test."""
    found: dict[tuple[int, int], tuple] = {}
    if table is None:
        return found
    starts = pc.cast(table["window_start"], pa.int64()).to_pylist()
    for start, row in zip(starts, table.to_pylist(), strict=True):
        key = (row["campaign_id"], start)
        assert key not in found, f"window emitted twice: {key}"
        found[key] = (row["views"], row["users"], row["top"])
    return found


JOIN_WITHIN_S = 1
JOIN_COLUMNS = {"click_id": "event_id", "click_time": "event_time", "click_user": "user_id"}


def join_operators(parallelism: int = 2, source: str = "events") -> list[dict[str, Any]]:
    """Views joined with clicks of the same campaign at most ``JOIN_WITHIN_S`` apart:
    ``source`` -> views (a filter) and ``source`` -> clicks -> click_cols (a map naming the
    click's columns) -> pairs (join, views on the left)."""
    return [
        views_filter(),
        {"id": "clicks", "type": "filter", "params": {"condition": "event_type = 'click'"}},
        {"id": "click_cols", "type": "map", "params": {"columns": JOIN_COLUMNS}},
        {
            "id": "pairs",
            "type": "join",
            "parallelism": parallelism,
            "params": {
                "key": ["campaign_id"],
                "time": "event_time",
                "within": f"{JOIN_WITHIN_S} seconds",
                "watermark": f"{WATERMARK_S} seconds",
            },
        },
    ]


def join_edges(source: str = "events") -> list[dict[str, str]]:
    """The edges of ``join_operators``; the views edge comes first (the left input)."""
    return [
        {"from": source, "to": "views"},
        {"from": source, "to": "clicks"},
        {"from": "clicks", "to": "click_cols"},
        {"from": "views", "to": "pairs"},
        {"from": "click_cols", "to": "pairs"},
    ]


def join_job(sink: dict[str, Any], parallelism: int = 2, key_groups: int = 32) -> dict[str, Any]:
    """generator -> views and clicks -> join -> sink."""
    return {
        "name": "join-test",
        "key_groups": key_groups,
        "operators": [
            generator(),
            *join_operators(parallelism),
            {"id": "joined", **sink},
        ],
        "edges": [*join_edges(), {"from": "pairs", "to": "joined"}],
    }


def expected_pairs(spark: SparkSession, start_ms: int, last_epoch: int) -> dict[tuple, tuple]:
    """The pairs a run stopped after ``last_epoch`` has emitted, by (view id, click id),
    from Spark's own join of the generator's rows: every view and click of the same
    campaign at most ``JOIN_WITHIN_S`` apart, both among the events of epochs
    0..``last_epoch`` (a pair is emitted when its later row arrives)."""
    spec = GeneratorSpec.from_params(GENERATOR_PARAMS, start_ms)
    rows = generator_rows(spark, spec, 0, (last_epoch + 1) * ROWS_PER_SECOND, 2)
    views = rows.where("event_type = 'view'").alias("v")
    clicks = rows.where("event_type = 'click'").alias("c")
    apart = F.abs(F.unix_micros("v.event_time") - F.unix_micros("c.event_time"))
    joined = views.join(
        clicks,
        (F.col("v.campaign_id") == F.col("c.campaign_id")) & (apart <= JOIN_WITHIN_S * 1_000_000),
    )
    return {
        (r["view"], r["click"]): (r["campaign"], r["at"], r["click_at"], r["user"])
        for r in joined.select(
            F.col("v.event_id").alias("view"),
            F.col("c.event_id").alias("click"),
            F.col("v.campaign_id").alias("campaign"),
            F.unix_micros("v.event_time").alias("at"),
            F.unix_micros("c.event_time").alias("click_at"),
            F.col("c.user_id").alias("user"),
        ).collect()
    }


def actual_pairs(table: pa.Table | None) -> dict[tuple, tuple]:
    """Sink rows keyed like ``expected_pairs``; a doubled pair fails the test."""
    found: dict[tuple, tuple] = {}
    if table is None:
        return found
    at = pc.cast(table["event_time"], pa.int64()).to_pylist()
    click_at = pc.cast(table["click_time"], pa.int64()).to_pylist()
    for row, t, ct in zip(table.to_pylist(), at, click_at, strict=True):
        key = (row["event_id"], row["click_id"])
        assert key not in found, f"pair emitted twice: {key}"
        assert row["event_type"] == "view"
        found[key] = (row["campaign_id"], t, ct, row["click_user"])
    return found


def window_and_join_job(windows_sink: dict[str, Any], pairs_sink: dict[str, Any]) -> dict[str, Any]:
    """``window_job`` with the views also joined with clicks (``join_job``'s pairs)."""
    job = window_job(windows_sink)
    job["operators"] += [o for o in join_operators() if o["id"] != "views"]
    job["operators"].append({"id": "joined", **pairs_sink})
    job["edges"] += [e for e in join_edges() if e["to"] != "views"]
    job["edges"].append({"from": "pairs", "to": "joined"})
    return job
