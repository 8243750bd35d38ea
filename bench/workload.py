"""The benchmark workload: a keyed tumbling-window count over generated events."""

from __future__ import annotations

from typing import Any

KEYS = 100_000
WINDOW = "10 seconds"
WATERMARK = "2 seconds"


def generator_source(rows_per_batch: int, keys: int = KEYS) -> dict[str, Any]:
    """The generator as the job's ``events`` operator: one epoch carries one second of
    event time, so windows close as epochs advance."""
    return {
        "id": "events",
        "type": "source.generator",
        "params": {"rows_per_second": rows_per_batch, "keys": keys},
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
    return {
        "name": name,
        "key_groups": key_groups,
        "operators": [
            source,
            {
                "id": "counts",
                "type": "window_aggregate",
                "parallelism": parallelism,
                "params": {
                    "key": ["campaign_id"],
                    "time": "event_time",
                    "window": window,
                    "watermark": watermark,
                    "aggregates": {"events": "count(*)"},
                },
            },
            {"id": "out", "type": "sink.memory", "params": {"name": sink_name}},
        ],
        "edges": [{"from": "events", "to": "counts"}, {"from": "counts", "to": "out"}],
    }
