"""The first pages: sign-in, job list, job detail with versions, history with filters; htmx
requests get only the fragment they swap."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from webapp.accounts.roles import Role

pytestmark = pytest.mark.django_db


def _add_version(token_client, job, simple_dag, comment):
    simple_dag["operators"][1]["params"]["condition"] = "event_type = 'purchase'"
    response = token_client(Role.EDITOR).post(
        f"/api/jobs/{job.pk}/versions",
        data=json.dumps(
            {"dag": simple_dag, "base_version": job.latest_version, "comment": comment}),
        content_type="application/json",
    )
    assert response.status_code == 201


def test_login_page_signs_in_and_rejects_a_wrong_password(make_user):
    make_user(Role.VIEWER, name="vera", password="correct-horse")
    client = Client()
    assert client.get("/login/").status_code == 200
    wrong = client.post("/login/", {"username": "vera", "password": "nope"})
    assert wrong.status_code == 200 and "do not match" in wrong.content.decode()
    right = client.post("/login/", {"username": "vera", "password": "correct-horse"})
    assert right.status_code == 302 and right["Location"] == "/"
    assert "vera" in client.get("/").content.decode()


def test_job_list_shows_jobs_and_links(session_client, job):
    page = session_client(Role.VIEWER).get("/").content.decode()
    assert f'href="/jobs/{job.pk}/"' in page and "v1" in page and "not running" in page


def test_job_detail_shows_versions_and_the_document(session_client, token_client, job, simple_dag):
    _add_version(token_client, job, simple_dag, "purchases now")
    client = session_client(Role.VIEWER)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Version 2" in page and "purchases now" in page and "purchase" in page
    old = client.get(f"/jobs/{job.pk}/?version=1").content.decode()
    assert "Version 1" in old and "event_type = &#x27;click&#x27;" in old


def test_job_detail_htmx_request_gets_only_the_version_panel(session_client, job):
    response = session_client(Role.VIEWER).get(
        f"/jobs/{job.pk}/?version=1", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="version-panel"
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<section class="card grow" id="version-panel">')
    assert "<html" not in html


@pytest.mark.parametrize("path", ["/jobs/999999/", "/jobs/{job}/?version=42"])
def test_missing_job_or_version_is_404(session_client, job, path):
    assert session_client(Role.VIEWER).get(path.format(job=job.pk)).status_code == 404


def test_history_filters_by_job_and_kind(session_client, token_client, job, simple_dag):
    _add_version(token_client, job, simple_dag, "second")
    client = session_client(Role.VIEWER)
    everything = client.get("/history/").content.decode()
    assert "job.created" in everything and "job.version_created" in everything
    only_versions = client.get(
        f"/history/?job={job.pk}&action=job.version", HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="history-rows",
    ).content.decode()
    assert only_versions.lstrip().startswith(f'<section id="history-rows" data-job="{job.pk}">')
    assert "job.version_created" in only_versions and "job.created" not in only_versions
    nothing = client.get("/history/?actor=nobody").content.decode()
    assert "Nothing recorded matches" in nothing


def test_static_htmx_is_served_from_our_files(session_client):
    page = session_client(Role.VIEWER).get("/").content.decode()
    assert "/static/vendor/htmx-2.0.11/htmx.min.js" in page
    assert "://" not in page.split("htmx.min.js")[0].rsplit("src=", 1)[1]


def test_healthz_needs_no_login():
    response = Client().get("/healthz")
    assert response.json()["checks"]["database"]["ok"] is True


# ---- run page, scaling controls, autoscaler --------------------------------------------------

def _feed(run, epochs=3, counts_in=3000.0):
    from tests.webapp.conftest import epoch_metrics
    from webapp.jobs.metrics import run_epoch_record

    for epoch in range(1, epochs + 1):
        run_epoch_record(run_id=run.pk, metrics=epoch_metrics(
            epoch, counts_in=counts_in, counts_capacity=2000.0))


def _config(page: str) -> dict:
    start = page.index('<script id="run-config" type="application/json">') + len(
        '<script id="run-config" type="application/json">')
    return json.loads(page[start:page.index("</script>", start)])


def test_run_page_offers_scaling_only_to_operators(session_client, live_run):
    viewer = session_client(Role.VIEWER).get(f"/runs/{live_run.pk}/").content.decode()
    assert "counts-job" in viewer and 'id="run-graph"' in viewer
    assert "scale-dialog" not in viewer and "Stop run" not in viewer
    assert _config(viewer)["can_operate"] is False
    operator = session_client(Role.OPERATOR).get(f"/runs/{live_run.pk}/").content.decode()
    config = _config(operator)
    assert "scale-dialog" in operator and "Stop run" in operator and config["can_operate"] is True
    assert config["ws"] == f"/ws/runs/{live_run.pk}/"
    assert config["sources"] == ["events"] and config["sinks"] == ["out"]
    assert config["limits"]["counts"]["max"] == 16  # bounded by the job's key groups


def test_run_page_serves_its_scripts_and_libraries_from_our_static_files(session_client, live_run):
    page = session_client(Role.VIEWER).get(f"/runs/{live_run.pk}/").content.decode()
    for path in ("/static/vendor/dagre-1.1.5/dagre.min.js",
                 "/static/vendor/uplot-1.6.32/uPlot.iife.min.js", "/static/js/run.js"):
        assert path in page
    assert "cdn" not in page.lower()


def test_a_failed_run_page_shows_its_cause_in_one_line(session_client, live_run):
    from webapp.jobs.models import RunStatus
    from webapp.runs.services import run_status_set

    run_status_set(run_id=live_run.pk, status=RunStatus.FAILED, detail=(
        "driver 42 exited with code 1: the query failed: ValueError: bad row\n"
        "last output:\nTraceback (most recent call last):"))
    page = session_client(Role.VIEWER).get(f"/runs/{live_run.pk}/").content.decode()

    failure = page.split('id="run-failure"', 1)[1].split("</section>", 1)[0]
    assert ('data-testid="failure-cause">driver 42 exited with code 1: the query failed: '
            'ValueError: bad row</span>') in failure
    # The driver's output is there, behind a disclosure, never in the headline.
    headline, output = failure.split("<details", 1)
    assert "Traceback" not in headline and "Traceback (most recent call last):" in output


def test_missing_run_is_404(session_client):
    assert session_client(Role.VIEWER).get("/runs/999999/").status_code == 404


def test_series_gives_chart_history_column_wise(session_client, live_run):
    _feed(live_run, epochs=4)
    series = session_client(Role.VIEWER).get(f"/runs/{live_run.pk}/series.json").json()
    assert series["epoch"] == [1, 2, 3, 4]
    assert series["in"] == [9000.0] * 4  # the source's output rate
    assert series["out"] == [10.0] * 4   # what reaches the sink
    assert series["p50"] == [800.0] * 4 and series["p99"] == [1500.0] * 4


def test_preview_shows_the_plan_change_and_records_nothing(session_client, live_run):
    _feed(live_run)
    response = session_client(Role.OPERATOR).post(
        f"/runs/{live_run.pk}/scale/preview",
        {"kind": "rescale", "operator": "counts", "parallelism": "3"})
    html = response.content.decode()
    assert response.status_code == 200 and "instances of counts: 2 -&gt; 3" in html
    assert "ETP after" in html and "congested" in html
    # The rescaled operator leads the table; operators the change leaves alone are counted.
    first_row = html.split("<tbody>")[1].split("</tr>")[0]
    assert 'class="changed"' in first_row and "<code>counts</code>" in first_row
    assert "other operator" in html
    assert live_run.reconfigurations.count() == 0


def test_preview_of_an_impossible_change_says_why(session_client, live_run):
    html = session_client(Role.OPERATOR).post(
        f"/runs/{live_run.pk}/scale/preview",
        {"kind": "rescale", "operator": "counts", "parallelism": "99"}).content.decode()
    assert 'role="alert"' in html and "16" in html


def test_reconfigure_needs_a_reason_then_records_and_signals(session_client, live_run):
    client = session_client(Role.OPERATOR)
    url = f"/runs/{live_run.pk}/reconfigure"
    refused = client.post(url, {"kind": "rescale", "operator": "counts", "parallelism": "3"})
    assert "Reason is required" in refused.content.decode()
    assert live_run.reconfigurations.count() == 0
    done = client.post(url, {"kind": "rescale", "operator": "counts", "parallelism": "3",
                             "reason": "counts congested", "request_id": "page-1"})
    assert done["HX-Trigger"] == "reconfigurations-changed"
    reconfiguration = live_run.reconfigurations.get()
    assert reconfiguration.request_id == "page-1" and reconfiguration.reason == "counts congested"
    again = client.post(url, {"kind": "rescale", "operator": "counts", "parallelism": "3",
                              "reason": "counts congested", "request_id": "page-1"})
    assert "already requested" in again.content.decode()
    assert live_run.reconfigurations.count() == 1
    listing = client.get(f"/runs/{live_run.pk}/reconfigurations").content.decode()
    assert "rescale" in listing and "counts congested" in listing and "requested" in listing


@pytest.mark.parametrize("path", ["scale/preview", "reconfigure", "autoscale/set", "stop"])
def test_viewers_and_editors_cannot_operate_a_run(session_client, live_run, path):
    body = {"kind": "rescale", "operator": "counts", "parallelism": "3", "reason": "x",
            "mode": "auto"}
    for role in (Role.VIEWER, Role.EDITOR):
        response = session_client(role).post(f"/runs/{live_run.pk}/{path}", body)
        assert response.status_code == 403
    live_run.refresh_from_db()
    assert live_run.reconfigurations.count() == 0 and live_run.status == "running"
    assert live_run.autoscale_mode == "off"


def test_autoscaler_mode_is_set_from_the_page(session_client, live_run):
    html = session_client(Role.OPERATOR).post(
        f"/runs/{live_run.pk}/autoscale/set", {"mode": "recommend"}).content.decode()
    live_run.refresh_from_db()
    assert live_run.autoscale_mode == "recommend" and 'value="recommend" selected' in html
    bad = session_client(Role.ADMIN).post(f"/runs/{live_run.pk}/autoscale/set", {"mode": "x"})
    assert 'role="alert"' in bad.content.decode()


def test_autoscaler_recommendations_are_listed(session_client, live_run):
    from webapp.jobs.models import Run

    Run.objects.filter(pk=live_run.pk).update(autoscale_mode="recommend", autoscale_proposal={
        "changes": {"counts": 4}, "reasons": {"counts": "autoscaler (DS2): counts 2 -> 4"}})
    html = session_client(Role.OPERATOR).get(f"/runs/{live_run.pk}/autoscale").content.decode()
    assert "Pending recommendations" in html and 'data-recommend-n="4"' in html
    assert "counts 2 -&gt; 4" in html


def test_stop_from_the_page(session_client, live_run):
    response = session_client(Role.OPERATOR).post(f"/runs/{live_run.pk}/stop")
    assert response.status_code == 302 and response["Location"] == f"/runs/{live_run.pk}/"
    live_run.refresh_from_db()
    assert live_run.status == "stopping"


def test_start_from_the_job_page(session_client, job):
    page = session_client(Role.OPERATOR).get(f"/jobs/{job.pk}/").content.decode()
    assert f'action="/jobs/{job.pk}/start"' in page
    assert f'action="/jobs/{job.pk}/start"' not in session_client(Role.VIEWER).get(
        f"/jobs/{job.pk}/").content.decode()
    client = session_client(Role.ADMIN)
    response = client.post(f"/jobs/{job.pk}/start", {"version": "1"})
    run = job.runs.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    # A second start lands on the run that is already active instead of failing.
    assert client.post(f"/jobs/{job.pk}/start")["Location"] == f"/runs/{run.pk}/"
    assert session_client(Role.EDITOR).post(f"/jobs/{job.pk}/start").status_code == 403


def test_live_epoch_of_ten_operators_is_small():
    """The bytes a run page receives per epoch of a ten-operator job (the run.epoch event as
    the consumer sends it)."""
    from tests.browser.fake_run import TEN_OPERATORS, synthetic_epoch
    from webapp.runs.live import live_metrics

    metrics = synthetic_epoch(TEN_OPERATORS, 1234)
    event = {"type": "run.epoch", "job": 12, "run": 345, "epoch": 1234,
             "metrics": live_metrics(metrics, at=1_763_780_000.123)}
    size = len(json.dumps(event, separators=(",", ":")).encode())
    assert 500 < size < 1200, size


# ---- editor and version diff ---------------------------------------------------------------

def test_editor_is_for_editors(session_client, job):
    viewer = session_client(Role.VIEWER)
    assert viewer.get("/jobs/new/").status_code == 403
    assert viewer.get(f"/jobs/{job.pk}/edit/").status_code == 403
    page = session_client(Role.EDITOR).get(f"/jobs/{job.pk}/edit/").content.decode()
    start = page.index('<script id="editor-config" type="application/json">')
    config = json.loads(page[start:].split(">", 1)[1].split("</script>", 1)[0])
    assert config["base_version"] == 1 and config["document"]["name"] == "clicks"
    assert {"source.generator", "filter", "window_aggregate", "sink.memory"} <= {
        t["type"] for t in config["catalog"]}
    assert config["ws"] == f"/ws/jobs/{job.pk}/"
    assert "/static/js/editor.js" in page


def test_job_pages_link_to_the_editor_only_for_editors(session_client, job):
    viewer, editor = session_client(Role.VIEWER), session_client(Role.EDITOR)
    assert f"/jobs/{job.pk}/edit/" not in viewer.get(f"/jobs/{job.pk}/").content.decode()
    assert f"/jobs/{job.pk}/edit/" in editor.get(f"/jobs/{job.pk}/").content.decode()
    assert "/jobs/new/" in editor.get("/").content.decode()
    assert "/jobs/new/" not in viewer.get("/").content.decode()


def test_diff_shows_plan_changes_and_both_documents(session_client, token_client, job, simple_dag):
    _add_version(token_client, job, simple_dag, "purchases now")
    viewer = session_client(Role.VIEWER)
    page = viewer.get(f"/jobs/{job.pk}/diff/?a=1&b=2").content.decode()
    assert "params of clicks changed: condition" in page
    assert 'class="diff-replace"' in page
    assert "event_type = &#x27;click&#x27;" in page and "event_type = &#x27;purchase&#x27;" in page
    assert viewer.get(f"/jobs/{job.pk}/diff/?a=1&b=9").status_code == 404


# ---- history -------------------------------------------------------------------------------

def _requested_rescale(session_client, live_run):
    session_client(Role.OPERATOR).post(f"/runs/{live_run.pk}/reconfigure", {
        "kind": "rescale", "operator": "counts", "parallelism": "3", "reason": "more room"})
    return live_run.reconfigurations.get()


def test_history_entry_shows_plan_diff_figures_and_current_outcome(session_client, live_run):
    from webapp.jobs.models import Reconfiguration

    _feed(live_run)
    reconfiguration = _requested_rescale(session_client, live_run)
    Reconfiguration.objects.filter(pk=reconfiguration.pk).update(
        status="applied", applied_epoch=12, control_latency_ms=8.5,
        after={"throughput_rows_per_s": 3100.0, "latency_p99_ms": 900.0})
    client = session_client(Role.VIEWER)
    page = client.get(f"/history/?job={live_run.job_id}").content.decode()
    assert "instances of counts: 2 -&gt; 3" in page and "applied at epoch 12" in page
    assert "3100/s" in page and "900 ms" in page and "more room" in page  # units as elsewhere
    applied = client.get("/history/?outcome=applied").content.decode()
    assert "<code>reconfiguration.rescale</code>" in applied
    assert "<code>job.created</code>" not in applied
    requested = client.get("/history/?outcome=requested&action=reconfiguration.").content.decode()
    assert "Nothing recorded matches" in requested


def test_history_csv_follows_the_filters(session_client, live_run):
    import csv
    import io

    _requested_rescale(session_client, live_run)
    client = session_client(Role.VIEWER)
    response = client.get("/history.csv?action=reconfiguration.")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0][:4] == ["at", "actor", "trigger", "action"]
    assert [r[3] for r in rows[1:]] == ["reconfiguration.rescale"]
    assert rows[1][rows[0].index("plan_changes")].startswith("instances of counts: 2 -> 3")
    everything = list(csv.reader(io.StringIO(client.get("/history.csv").content.decode())))
    assert {"job.created", "reconfiguration.rescale"} <= {r[3] for r in everything[1:]}
    assert Client().get("/history.csv").status_code == 302


def test_history_offers_actor_and_kind_choices(session_client, live_run):
    _requested_rescale(session_client, live_run)
    page = session_client(Role.VIEWER).get("/history/").content.decode()
    assert '<option value="reconfiguration.">reconfiguration.*</option>' in page
    assert "<option>operator-session</option>" in page


def test_refused_and_missing_pages_keep_the_navigation_and_say_why(session_client):
    viewer = session_client(Role.VIEWER)
    refused = viewer.get("/jobs/new/")
    page = refused.content.decode()
    assert refused.status_code == 403 and "Not allowed" in page and "editor role" in page
    assert 'aria-label="Main"' in page
    missing = viewer.get("/jobs/999999/")
    page = missing.content.decode()
    assert missing.status_code == 404 and "Not found" in page and "no job 999999" in page
    assert 'aria-label="Main"' in page


def test_job_page_lists_its_runs_with_their_failure_cause(session_client, job):
    from webapp.jobs.models import Run, RunStatus

    version = job.versions.get(number=1)
    Run.objects.create(
        job=job, version=version, status=RunStatus.FAILED, restarts=3,
        failure_reason="\nAnalysisException: cannot resolve 'x'\n  at line 2\n  at line 3",
    )
    page = session_client(Role.VIEWER).get(f"/jobs/{job.pk}/").content.decode()
    runs = page.split('id="runs-title"')[1]
    assert "status-failed" in runs and "<td>3</td>" in runs
    assert "AnalysisException: cannot resolve" in runs and "at line 2" not in runs


def test_the_start_button_names_the_version_shown(session_client, token_client, job, simple_dag):
    _add_version(token_client, job, simple_dag, "v2")
    client = session_client(Role.OPERATOR)
    assert "Start v2" in client.get(f"/jobs/{job.pk}/").content.decode()
    panel = client.get(
        f"/jobs/{job.pk}/?version=1", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="version-panel"
    ).content.decode()
    assert "Start v1" in panel and 'value="1"' in panel and "Start v2" not in panel


def test_the_job_list_filters_by_name_and_by_whether_a_run_is_going(
    session_client, make_user, simple_dag
):
    from webapp.jobs.models import Run, Trigger
    from webapp.jobs.services import job_create

    author = make_user(Role.EDITOR, name="author")
    names = ["orders-eu", "orders-us", "clicks"]
    jobs = {}
    for name in names:
        version = job_create(dag={**simple_dag, "name": name}, actor=author, trigger=Trigger.USER)
        jobs[name] = version.job
    busy = jobs["orders-us"]
    Run.objects.create(job=busy, version=busy.versions.get(number=1))
    client = session_client(Role.VIEWER)

    def listed(query: str) -> list[str]:
        page = client.get(f"/?{query}").content.decode()
        return [n for n in names if f">{n}</a>" in page]

    assert listed("") == names
    assert listed("q=ORDERS") == ["orders-eu", "orders-us"]
    assert listed("q=orders&state=running") == ["orders-us"]
    assert listed("state=idle") == ["orders-eu", "clicks"]
    assert "No job matches" in client.get("/?q=nothing-like-this").content.decode()


def test_history_filters_offer_each_actor_and_kind_once(make_user):
    from webapp.audit.services import audit_record
    from webapp.jobs.models import Trigger
    from webapp.pages.selectors import history_choices

    people = [make_user(Role.OPERATOR, name=n) for n in ("ann", "bob", "cy")]
    for i in range(12):
        action = ("run.started", "run.stopped")[i % 2]
        audit_record(actor=people[i % 3], trigger=Trigger.USER, action=action)
    choices = history_choices()
    assert choices["actors"] == ["ann", "bob", "cy"]
    assert choices["kinds"] == ["run.", "run.started", "run.stopped"]
