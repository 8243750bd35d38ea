"""A windowed run fed by the test instead of a Spark driver: a tumbling window closes every
`CLOSE_EVERY` epochs, so its sink gets rows (and a latency) only in those epochs, and the
window's ETP reads 0 in the others, as a driver's per-epoch figures do.

`python -m tests.browser.fake_windowed create NAME` prints `RUN_ID JOB_ID`;
`... feed RUN_ID [PERIOD_S]` publishes an epoch a period through the driver's own path
(`run_epoch_publish`) until the run leaves the running state."""

from __future__ import annotations

import time
from typing import Any

CLOSE_EVERY = 5
RATE = 1000.0
WATERMARK_BEHIND_MS = 7000.0  # behind the wall clock: a 5 s watermark delay plus 2 s of lag

WINDOWED = {
    "name": "windowed",
    "key_groups": 16,
    "operators": [
        {"id": "events", "type": "source.generator", "params": {"rows_per_second": 1000}},
        {"id": "counts", "type": "window_aggregate", "parallelism": 2,
         "params": {"key": ["campaign_id"], "time": "event_time", "window": "5 seconds",
                    "watermark": "5 seconds", "aggregates": {"views": "count(*)"}}},
        {"id": "out", "type": "sink.memory", "params": {"name": "windowed_out"}},
    ],
    "edges": [{"from": "events", "to": "counts"}, {"from": "counts", "to": "out"}],
}


def windowed_epoch(epoch: int, now_ms: float) -> dict[str, Any]:
    """One epoch's metrics: the window sends 500 rows when it closes, nothing otherwise."""
    closes = epoch % CLOSE_EVERY == 0
    emitted = 500 if closes else 0
    watermark = now_ms - WATERMARK_BEHIND_MS
    return {
        "epoch": epoch, "batch_duration_ms": 400.0, "interval_ms": 1000.0, "backlog_rows": 0,
        "latency_ms": ({"p50": 8000.0, "p99": 9500.0, "max": 9800.0} if closes
                       else {"p50": None, "p99": None, "max": None}),
        "operators": {
            "events": {"instances": 1, "rows_in": None, "rows_out": int(RATE),
                       "busy_ms": None, "input_rate": None, "processing_rate": None,
                       "output_rate": RATE, "congested": False, "etp": 1.0},
            "counts": {"instances": 2, "rows_in": int(RATE), "rows_out": emitted,
                       "busy_ms": [300.0, 100.0], "rows_in_per_instance": [750, 250],
                       "input_rate": RATE, "processing_rate": 5000.0,
                       "output_rate": float(emitted), "congested": False,
                       "etp": 1.0 if closes else 0.0,
                       "watermark_ms": watermark, "max_event_ms": watermark + 5000.0,
                       "watermark_delay_ms": WATERMARK_BEHIND_MS, "watermark_lag_ms": 5000.0,
                       "state_bytes_read": 1_234_567, "state_bytes_written": 890},
            "out": {"instances": 1, "rows_in": emitted, "rows_out": emitted, "busy_ms": None,
                    "input_rate": float(emitted), "processing_rate": None,
                    "output_rate": float(emitted), "congested": False,
                    "etp": 1.0 if closes else 0.0},
        },
    }


def feed(*, run_id: int, period_s: float) -> None:
    from webapp.jobs.models import Run, RunStatus
    from webapp.runs.live import run_epoch_publish

    epoch = Run.objects.get(pk=run_id).current_epoch or 0
    while Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).exists():
        epoch += 1
        run_epoch_publish(run_id=run_id, metrics=windowed_epoch(epoch, time.time() * 1000.0))
        time.sleep(period_s)


def main(argv: list[str]) -> None:
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    django.setup()
    from tests.browser.fake_run import fake_run_create

    command, rest = argv[0], argv[1:]
    if command == "create":
        run = fake_run_create(dag=WINDOWED, name=rest[0])
        print(f"{run.pk} {run.job_id}", flush=True)
    elif command == "feed":
        feed(run_id=int(rest[0]), period_s=float(rest[1]) if len(rest) > 1 else 0.5)
    else:
        raise SystemExit(f"unknown command {command!r}: use create or feed")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
