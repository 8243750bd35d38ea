"""The job list's search and filters (name, run status, archive) kept in the URL, a page at a
time, with a clear message for a bad filter; the job page's table of its runs, paged."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from webapp.accounts.roles import Role

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(make_user, simple_dag):
    """Five jobs: one running, one whose last run failed, one stopped, one never run, one
    archived (stopped)."""
    from webapp.jobs.models import Run, RunStatus, Trigger
    from webapp.jobs.services import job_archive, job_create

    author = make_user(Role.EDITOR, name="author")
    made = {}
    for name in ("orders-eu", "orders-us", "clicks", "views", "orders-old"):
        made[name] = job_create(dag={**simple_dag, "name": name}, actor=author,
                                trigger=Trigger.USER).job

    def run(name: str, *statuses: str) -> None:
        for status in statuses:
            Run.objects.create(job=made[name], version=made[name].versions.get(number=1),
                               status=status)

    # The failed job ran fine once, then failed; the running one failed before.
    run("orders-us", RunStatus.FAILED, RunStatus.RUNNING)
    run("clicks", RunStatus.STOPPED, RunStatus.FAILED)
    run("views", RunStatus.FAILED, RunStatus.STOPPED)
    run("orders-old", RunStatus.STOPPED)
    job_archive(job_id=made["orders-old"].pk, actor=author, trigger=Trigger.USER)
    return made


def _listed(client, query: str) -> list[str]:
    page = client.get(f"/?{query}").content.decode()
    return re.findall(r'<tr data-job="([^"]+)">', page)


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("", ["clicks", "orders-eu", "orders-us", "views"]),
        ("q=ORDERS", ["orders-eu", "orders-us"]),
        ("q=+orders-u+", ["orders-us"]),
        ("state=running", ["orders-us"]),
        ("state=failed", ["clicks"]),
        ("state=idle", ["orders-eu", "views"]),
        ("archived=only", ["orders-old"]),
        ("archived=include", ["clicks", "orders-eu", "orders-old", "orders-us", "views"]),
        ("q=orders&archived=include&state=idle", ["orders-eu", "orders-old"]),
        ("q=orders&state=failed", []),
    ],
)
def test_the_job_list_finds_jobs_by_name_status_and_archive(session_client, jobs, query, names):
    assert _listed(session_client(Role.VIEWER), query) == names


def test_the_form_keeps_the_filters_it_was_sent_with(session_client, jobs):
    page = session_client(Role.VIEWER).get("/?q=orders&state=failed&archived=only")
    html = page.content.decode()
    assert 'name="q" value="orders"' in html
    assert '<option value="failed" selected>last run failed</option>' in html
    assert '<option value="only" selected>only archived</option>' in html
    assert 'method="get"' in html and "No job matches" in html


def test_archived_jobs_are_marked_when_shown(session_client, jobs):
    html = session_client(Role.VIEWER).get("/?archived=include").content.decode()
    row = html.split('<tr data-job="orders-old">')[1].split("</tr>")[0]
    assert ">archived</span>" in row
    assert ">archived</span>" not in html.split('<tr data-job="clicks">')[1].split("</tr>")[0]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("state=sleeping", "The filter state must be one of running, idle, failed (or empty)."),
        ("archived=maybe", "The filter archived must be one of hide, include, only."),
        ("q=" + "x" * 201, "The filter q is 201 characters long: at most 200."),
        ("page=two", "The page must be a whole number from 1, not &#x27;two&#x27;."),
        ("page=0", "The page must be a whole number from 1, not &#x27;0&#x27;."),
        ("page=%C2%B2", "The page must be a whole number from 1, not &#x27;\u00b2&#x27;."),
    ],
)
def test_a_bad_filter_is_refused_naming_it(session_client, jobs, query, message):
    response = session_client(Role.VIEWER).get(f"/?{query}")
    html = response.content.decode()
    assert response.status_code == 400 and message in html
    assert 'id="job-table"' not in html and 'aria-label="Main"' in html


def test_the_list_is_paged_and_the_pages_keep_the_filters(session_client, make_user,
                                                          simple_dag):
    from webapp.jobs.models import Trigger
    from webapp.jobs.services import job_create
    from webapp.pages.views import JOBS_PER_PAGE

    author = make_user(Role.EDITOR, name="author")
    names = [f"load-{i:02d}" for i in range(JOBS_PER_PAGE + 3)]
    for name in [*names, "other"]:
        job_create(dag={**simple_dag, "name": name}, actor=author, trigger=Trigger.USER)
    client = session_client(Role.VIEWER)
    first = client.get("/?q=load").content.decode()
    assert re.findall(r'<tr data-job="([^"]+)">', first) == names[:JOBS_PER_PAGE]
    assert f"page 1 of 2 · {len(names)} jobs" in first
    assert 'rel="next" href="?q=load&amp;page=2"' in first and 'rel="prev"' not in first
    second = client.get("/?q=load&page=2").content.decode()
    assert re.findall(r'<tr data-job="([^"]+)">', second) == names[JOBS_PER_PAGE:]
    assert 'rel="prev" href="?q=load&amp;page=1"' in second
    # Past the end: the last page.
    assert _listed(client, "q=load&page=9") == names[JOBS_PER_PAGE:]
    assert _listed(client, "q=load&page=" + "9" * 5000) == names[JOBS_PER_PAGE:]
    # One page: no pager.
    assert 'aria-label="Job list pages"' not in client.get("/?q=other").content.decode()


def test_the_job_page_lists_every_run_with_its_figures_a_page_at_a_time(session_client, job):
    from django.utils import timezone

    from webapp.jobs.models import Run, RunStatus
    from webapp.pages.views import RUNS_PER_PAGE

    version = job.versions.get(number=1)
    start = timezone.now() - timedelta(hours=3)
    runs = [Run.objects.create(job=job, version=version, status=RunStatus.STOPPED,
                               started_at=start, stopped_at=start + timedelta(minutes=5))
            for _ in range(RUNS_PER_PAGE + 1)]
    runs.append(Run.objects.create(
        job=job, version=version, status=RunStatus.FAILED, restarts=5, started_at=start,
        stopped_at=start + timedelta(hours=2, minutes=3),
        failure_reason="driver 7 exited with code 1: ParseException: bad\nlast output:\n"
                       "Traceback (most recent call last):"))
    runs.append(Run.objects.create(job=job, version=version, status=RunStatus.RUNNING,
                                   started_at=start))
    client = session_client(Role.VIEWER)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    table = page.split('id="job-runs"')[1].split("</section>")[0]
    shown = [int(n) for n in re.findall(r'<tr data-run="(\d+)">', table)]
    assert shown == [r.pk for r in reversed(runs)][:RUNS_PER_PAGE]
    assert f"Runs <span class=\"muted\">({len(runs)})</span>" in page
    running = table.split(f'<tr data-run="{runs[-1].pk}">')[1].split("</tr>")[0]
    assert "status-running" in running and "3\xa0hours so far" in running
    assert f'href="/runs/{runs[-1].pk}/"' in running
    failed = table.split(f'<tr data-run="{runs[-2].pk}">')[1].split("</tr>")[0]
    assert "<td>5</td>" in failed and "2\xa0hours, 3\xa0minutes" in failed
    assert "ParseException: bad" in failed and "Traceback" not in failed
    assert 'rel="next" href="?runs_page=2#job-runs"' in table

    older = client.get(f"/jobs/{job.pk}/?runs_page=2").content.decode()
    table = older.split('id="job-runs"')[1].split("</section>")[0]
    assert [int(n) for n in re.findall(r'<tr data-run="(\d+)">', table)] == [
        r.pk for r in reversed(runs)][RUNS_PER_PAGE:]
    assert "5\xa0minutes" in table and 'rel="prev"' in table
    assert client.get(f"/jobs/{job.pk}/?runs_page=x").status_code == 400
