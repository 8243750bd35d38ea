"""Job documents and the results they must produce, computed straight from the
generator's definition (a batch query over the same event ids), not by the runtime."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from engine.runtime.sources import GeneratorSpec, generator_batch

ROWS_PER_SECOND = 4000
KEYS = 500
WINDOW_S = 4
WATERMARK_S = 1
AGGREGATES = {"views": "count(*)", "users": "sum(user_id)", "top": "max(amount)"}


def window_job(
    sink: dict[str, Any],
    parallelism: int = 2,
    condition: str = "event_type = 'view'",
    key_groups: int = 32,
    slide_s: int | None = None,
) -> dict[str, Any]:
    """generator -> filter -> window_aggregate (tumbling, or sliding by ``slide_s``) -> sink."""
    slide = {} if slide_s is None else {"slide": f"{slide_s} seconds"}
    return {
        "name": "runtime-test",
        "key_groups": key_groups,
        "operators": [
            {
                "id": "events",
                "type": "source.generator",
                "params": {"rows_per_second": ROWS_PER_SECOND, "keys": KEYS, "seed": 7},
            },
            {"id": "views", "type": "filter", "params": {"condition": condition}},
            {
                "id": "counts",
                "type": "window_aggregate",
                "parallelism": parallelism,
                "params": {
                    "key": ["campaign_id"],
                    "time": "event_time",
                    "window": f"{WINDOW_S} seconds",
                    "watermark": f"{WATERMARK_S} seconds",
                    "aggregates": AGGREGATES,
                    **slide,
                },
            },
            {"id": "out", **sink},
        ],
        "edges": [
            {"from": "events", "to": "views"},
            {"from": "views", "to": "counts"},
            {"from": "counts", "to": "out"},
        ],
    }


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
    spec = GeneratorSpec(rows_per_second=ROWS_PER_SECOND, keys=KEYS, seed=7, start_ms=start_ms)
    rows = generator_batch(spark, spec, 0, (last_epoch + 1) * ROWS_PER_SECOND)
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
    cutoff = max_us - WATERMARK_S * 1_000_000
    grouped = (
        kept.groupBy(
            "campaign_id",
            F.window("event_time", f"{WINDOW_S} seconds", f"{slide_s or WINDOW_S} seconds"),
        )
        .agg(
            F.count(F.lit(1)).alias("views"),
            F.sum("user_id").alias("users"),
            F.max("amount").alias("top"),
        )
        .where(F.unix_micros("window.end") <= cutoff)
    )
    return {
        (r["campaign_id"], r["start"]): (r["views"], r["users"], r["top"])
        for r in grouped.select(
            "campaign_id", F.unix_micros("window.start").alias("start"), "views", "users", "top"
        ).collect()
    }


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
