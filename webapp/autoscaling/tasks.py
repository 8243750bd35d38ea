from celery import shared_task

from webapp.autoscaling.services import autoscale_evaluate as evaluate


@shared_task(acks_late=True, ignore_result=True)
def autoscale_evaluate() -> list[str]:
    """Propose, and in auto mode apply, DS2 parallelism for runs whose autoscaler is on."""
    return evaluate()
