"""What a page's URL names, found or answered with 404: a run, a job and one of its versions."""

from __future__ import annotations

from django.http import Http404

from webapp.errors import NotFound
from webapp.jobs import selectors as job_selectors
from webapp.runs.selectors import run_get


def int_or_none(value: str | None) -> int | None:
    """A query parameter as a whole number; None when missing or not one."""
    try:
        return int(value) if value else None
    except ValueError:
        return None


def run_or_404(run_id: int):
    """The run, or a 404 naming it."""
    try:
        return run_get(run_id=run_id)
    except NotFound as error:
        raise Http404(str(error)) from None


def job_version_or_404(job_id: int, version: str | None):
    """The job and its version ``version`` (the latest when missing), or a 404 naming them."""
    try:
        job = job_selectors.job_get(job_id=job_id)
        return job, job_selectors.job_version_get(job=job, number=int_or_none(version))
    except NotFound as error:
        raise Http404(str(error)) from None
