from celery import shared_task
from django.conf import settings

from webapp.jobs.retention import metrics_compact as compact


@shared_task(acks_late=True)
def metrics_compact() -> int:
    """Fold epochs past the full-resolution window into minutes, drop minutes past the audit
    retention; returns how many epoch rows were folded. Safe to run twice."""
    done = compact(window_s=settings.METRICS_FULL_RESOLUTION_S,
                   retention_days=settings.AUDIT_RETENTION_DAYS)
    return done.epochs_rolled_up
