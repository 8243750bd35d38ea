"""The demo account and job that a fresh installation starts with."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from webapp.accounts.models import User
from webapp.accounts.roles import Role
from webapp.accounts.services import user_create
from webapp.demo_stream import DEMO_DAG
from webapp.jobs.models import Job, Trigger
from webapp.jobs.services import job_create
from webapp.runs.services import run_start

DEMO_USERNAME = "admin"


@dataclass(frozen=True)
class DemoResult:
    username: str
    password: str | None  # shown once: when the account is created
    created_user: bool
    job_id: int | None
    job_name: str
    run_id: int | None


def demo_ensure() -> DemoResult:
    """Idempotent: a second call creates nothing."""
    with transaction.atomic():
        admin = User.objects.filter(username=DEMO_USERNAME).first()
        created = admin is None
        password = None
        if created:
            # STREAMSCALE_ADMIN_PASSWORD, or a random one that start-up prints this once.
            password = settings.ADMIN_PASSWORD or secrets.token_urlsafe(12)
            admin = user_create(username=DEMO_USERNAME, role=Role.ADMIN, password=password)
        if not settings.DEMO:  # STREAMSCALE_DEMO=0: the admin only
            return DemoResult(DEMO_USERNAME, password, created, None, DEMO_DAG["name"], None)
        job = Job.objects.filter(name=DEMO_DAG["name"]).first()
        run_id = None
        if job is None:
            job = job_create(
                dag=DEMO_DAG, actor=admin, trigger=Trigger.USER, comment="demo job"
            ).job
            # A fresh installation shows a live job; a demo run someone stopped stays stopped.
            run_id = run_start(job_id=job.pk, version=None, actor=admin, trigger=Trigger.USER).pk
    return DemoResult(DEMO_USERNAME, password, created, job.pk, job.name, run_id)
