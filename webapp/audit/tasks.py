from celery import shared_task
from django.conf import settings

from webapp.audit.services import audit_prune as prune


@shared_task(acks_late=True)
def audit_prune(retention_days: int | None = None) -> int:
    """Drop audit entries past the retention setting; running it twice deletes nothing more."""
    return prune(retention_days=retention_days or settings.AUDIT_RETENTION_DAYS)
