"""The benchmark workload: a keyed tumbling-window count over generated events.

Its pieces (``generator_source``, ``views_filter``, ``window_count``, ``chain_job``) also
build the other jobs that count views per campaign: the control-plane benchmark's and the
runtime tests'."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

KEYS = 100_000
WINDOW = "10 seconds"
WATERMARK = "2 seconds"


def generator_source(rows_per_batch: int, keys: int = KEYS, parallelism: int = 1) -> dict[str, Any]:
    """The generator as the job's ``events`` operator, its rows made by ``parallelism``
    tasks: one epoch carries one second of event time, so windows close as epochs
    advance."""
    return {
        "id": "events",
        "type": "source.generator",
        "parallelism": parallelism,
        "params": {"rows_per_second": rows_per_batch, "keys": keys},
    }


def views_filter(condition: str = "event_type = 'view'") -> dict[str, Any]:
    """The ``views`` operator: a filter keeping the rows ``condition`` holds for."""
    return {"id": "views", "type": "filter", "params": {"condition": condition}}


def window_count(
    parallelism: int,
    *,
    window: str = WINDOW,
    watermark: str = WATERMARK,
    aggregates: dict[str, str] | None = None,
    slide: str | None = None,
) -> dict[str, Any]:
    """The ``counts`` operator: a window aggregate per campaign on the event time, tumbling
    or sliding by ``slide``; ``aggregates`` default to a count of the rows as ``events``."""
    params: dict[str, Any] = {
        "key": ["campaign_id"],
        "time": "event_time",
        "window": window,
        "watermark": watermark,
        "aggregates": aggregates or {"events": "count(*)"},
    }
    if slide is not None:
        params["slide"] = slide
    return {
        "id": "counts",
        "type": "window_aggregate",
        "parallelism": parallelism,
        "params": params,
    }


def chain_job(name: str, operators: list[dict[str, Any]], *, key_groups: int) -> dict[str, Any]:
    """A job document whose ``operators`` run one after the other, in the order given."""
    return {
        "name": name,
        "key_groups": key_groups,
        "operators": operators,
        "edges": [{"from": a["id"], "to": b["id"]} for a, b in pairwise(operators)],
    }


def window_count_job(
    source: dict[str, Any],
    parallelism: int,
    sink_name: str,
    *,
    name: str = "bench-window-count",
    window: str = WINDOW,
    watermark: str = WATERMARK,
    key_groups: int = 128,
) -> dict[str, Any]:
    """The job graph: ``source`` (an operator with id ``events``) -> window_aggregate
    (count per campaign) -> memory sink."""
    return chain_job(
        name,
        [
            source,
            window_count(parallelism, window=window, watermark=watermark),
            {"id": "out", "type": "sink.memory", "params": {"name": sink_name}},
        ],
        key_groups=key_groups,
    )
