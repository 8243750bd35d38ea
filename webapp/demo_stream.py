"""The demo's stream and job: what the launcher's producer writes and the demo job reads.

Kept free of Django so the launcher can start the producer before anything is set up.
"""

from __future__ import annotations

# The demo job reads a stream of the product's Redis that the launcher's producer feeds
# (see demo_producer_argv); `env:REDIS_URL` is the URL the driver runs with.
DEMO_STREAM = "streamscale:demo:events"
DEMO_KEYS = 2000
DEMO_RATE = 1000  # events per second: modest, on a laptop shared with the web stack
DEMO_MAXLEN = 500_000  # the stream keeps about 8 minutes of events
DEMO_EVENT_SCHEMA = {"event_id": "long", "event_time": "timestamp", "campaign_id": "long",
                     "user_id": "long", "event_type": "string", "amount": "double"}


# The demo job: views per campaign over 10-second windows, read from the demo stream.
DEMO_DAG = {
    "name": "campaign-views",
    "key_groups": 128,
    "operators": [
        {"id": "events", "type": "source.redis_stream",
         "params": {"url": "env:REDIS_URL", "streams": [DEMO_STREAM], "start": "latest",
                    "schema": DEMO_EVENT_SCHEMA, "time_field": "event_time"}},
        {"id": "views", "type": "filter", "params": {"condition": "event_type = 'view'"}},
        {"id": "counts", "type": "window_aggregate", "parallelism": 2,
         "params": {"key": ["campaign_id"], "time": "event_time", "window": "10 seconds",
                    "watermark": "5 seconds", "aggregates": {"views": "count(*)"}}},
        {"id": "out", "type": "sink.postgres", "params": {"table": "campaign_views"}},
    ],
    "edges": [{"from": "events", "to": "views"}, {"from": "views", "to": "counts"},
              {"from": "counts", "to": "out"}],
}


def demo_producer_argv(python: str) -> list[str]:
    """The producer process that feeds the demo job's stream (started by the launcher with
    REDIS_URL in its environment: the password stays out of the process list)."""
    return [python, "-m", "engine", "produce", "env:REDIS_URL", "--stream", DEMO_STREAM,
            "--keys", str(DEMO_KEYS), "--rate", str(DEMO_RATE), "--maxlen", str(DEMO_MAXLEN),
            "--progress-every", "300"]
