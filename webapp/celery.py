"""The Celery application on the Redis broker; settings come from Django's CELERY_* names."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
os.environ.setdefault("PGAPPNAME", "streamscale-celery")  # names its database connections

app = Celery("webapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
