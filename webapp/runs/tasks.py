"""Celery tasks for runs. They take ids, are idempotent, and call the supervision service."""

from celery import shared_task

from webapp.dependencies import beat_tick_record
from webapp.runs import supervision


@shared_task(acks_late=True)
def run_launch(run_id: int) -> str:
    """Start the run's driver unless one is already alive."""
    return supervision.run_launch(run_id=run_id)


@shared_task(acks_late=True, ignore_result=True)
def runs_watch() -> list[str]:
    """Find drivers that died, restart them from their checkpoints, and settle stopped runs.
    Beat sends it every ``RUNS_WATCH_S``, so its run is also the beat's sign of life for
    ``/healthz``."""
    beat_tick_record()
    return supervision.runs_watch()
