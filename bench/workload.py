"""The benchmark workload: a keyed tumbling-window count over generated events."""

from __future__ import annotations

from typing import Any

KEYS = 100_000
WINDOW = "10 seconds"
WATERMARK = "2 seconds"


def window_count_job(
    rows_per_batch: int, parallelism: int, sink_name: str, keys: int = KEYS, key_groups: int = 128
) -> dict[str, Any]:
    """The job graph: generator -> window_aggregate(count per campaign) -> memory sink.

    One epoch carries one second of event time, so windows close as epochs advance.
    """
    return {
        "name": "bench-window-count",
        "key_groups": key_groups,
        "operators": [
            {
                "id": "events",
                "type": "source.generator",
                "params": {
                    "rows_per_second": rows_per_batch,
                    "keys": keys,
                },
            },
            {
                "id": "counts",
                "type": "window_aggregate",
                "parallelism": parallelism,
                "params": {
                    "key": ["campaign_id"],
                    "time": "event_time",
                    "window": WINDOW,
                    "watermark": WATERMARK,
                    "aggregates": {"events": "count(*)"},
                },
            },
            {"id": "out", "type": "sink.memory", "params": {"name": sink_name}},
        ],
        "edges": [{"from": "events", "to": "counts"}, {"from": "counts", "to": "out"}],
    }
