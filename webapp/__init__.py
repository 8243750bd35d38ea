"""The web application: models, services, pages, API, live updates and background tasks."""

from webapp.celery import app as celery_app

__all__ = ["celery_app"]
