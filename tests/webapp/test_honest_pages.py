"""What the pages and the API say when things go wrong or cannot be done: a failed run's cause
and its restarts, controls that match what the server accepts, bounds on every field, and the
autoscaler's leftovers cleared."""

from __future__ import annotations

import json

import pytest

from webapp.accounts.roles import Role

pytestmark = pytest.mark.django_db

TRACEBACK = "Traceback (most recent call last):\n  File \"driver.py\", line 1\nValueError: bad row"


def _fail(run, *, restarts: int = 1):
    from webapp.jobs.models import RunStatus
    from webapp.runs.services import run_status_set

    for n in range(restarts):
        run_status_set(run_id=run.pk, status=RunStatus.RECOVERING, output=f"{TRACEBACK} {n}",
                       detail=f"driver {40 + n} exited with code 1: the query failed: "
                              "ValueError: bad row; restarting from the checkpoint")
        run_status_set(run_id=run.pk, status=RunStatus.RUNNING)
    run_status_set(run_id=run.pk, status=RunStatus.FAILED, output=TRACEBACK,
                   detail="driver 42 exited with code 1: the query failed: ValueError: bad row; "
                          "6 crashes, more than the 5 restarts allowed within 10 minutes")
    run.refresh_from_db()
    return run


def _section(page: str, marker: str) -> str:
    return page.split(marker, 1)[1].split("</section>", 1)[0]


# ---- 1. a failed run shows its cause --------------------------------------------------------

def test_an_expression_spark_cannot_parse_is_refused_before_it_is_saved(token_client,
                                                                        simple_dag):
    from webapp.jobs.models import Job

    simple_dag["operators"][1]["params"]["condition"] = "event_type = 'view'; DROP TABLE x"
    response = token_client(Role.EDITOR).post("/api/jobs", data=json.dumps(simple_dag),
                                              content_type="application/json")
    assert response.status_code == 400
    assert response.json()["problems"] == [{
        "where": "operator 'clicks'",
        "message": "param 'condition': bad expression \"event_type = 'view'; DROP TABLE x\": "
                   "syntax error at or near ';'"}]
    assert not Job.objects.exists()


def test_a_failed_run_page_shows_the_cause_in_one_line_and_the_output_behind_a_disclosure(
    session_client, live_run
):
    run = _fail(live_run, restarts=2)
    page = session_client(Role.VIEWER).get(f"/runs/{run.pk}/").content.decode()

    failure = _section(page, 'id="run-failure"')
    cause = failure.split('data-testid="failure-cause">', 1)[1].split("</span>", 1)[0]
    assert cause == ("driver 42 exited with code 1: the query failed: ValueError: bad row; "
                     "6 crashes, more than the 5 restarts allowed within 10 minutes")
    assert "Traceback" not in failure.split("<details", 1)[0]
    assert "<summary>The driver's last output</summary>" in failure
    assert "ValueError: bad row</pre>" in failure
    restarts = _section(page, 'id="run-restarts"')
    assert restarts.count("<li>") == 2 and "driver 40 exited with code 1" in restarts
    assert "Traceback (most recent call last)" in restarts.split("<details", 1)[1]


def test_each_restart_of_a_run_that_never_gets_back_to_running_is_shown(session_client,
                                                                         live_run):
    from webapp.jobs.models import RunStatus
    from webapp.runs.services import run_status_set

    for n in range(3):  # the driver dies before its first epoch, three times in a row
        run_status_set(run_id=live_run.pk, status=RunStatus.RECOVERING, output=TRACEBACK,
                       detail=f"driver {50 + n} exited with code 1; restarting from the checkpoint")
    page = session_client(Role.VIEWER).get(f"/runs/{live_run.pk}/").content.decode()

    restarts = _section(page, 'id="run-restarts"')
    assert restarts.count("<li>") == 3
    assert all(f"driver {50 + n} exited with code 1" in restarts for n in range(3))


def test_history_keeps_a_restart_s_cause_as_its_reason_without_the_traceback(live_run):
    from webapp.audit.models import AuditEntry

    _fail(live_run)
    entries = AuditEntry.objects.filter(run_id_ref=live_run.pk, action__in=(
        "run.recovering", "run.failed"))
    assert entries.count() == 2
    for entry in entries:
        assert "Traceback" not in entry.reason and "\n" not in entry.reason
        assert entry.details["output"].startswith("Traceback")


def test_the_incidents_fragment_is_what_the_page_refreshes_live(session_client, live_run):
    _fail(live_run)
    fragment = session_client(Role.VIEWER).get(f"/runs/{live_run.pk}/incidents")
    assert fragment.status_code == 200
    text = fragment.content.decode()
    assert 'id="run-failure"' in text and 'id="run-restarts"' in text
    assert "<html" not in text


def test_job_page_and_job_list_say_failed_with_the_cause(session_client, live_run):
    _fail(live_run)
    client = session_client(Role.VIEWER)
    job_page = client.get(f"/jobs/{live_run.job_id}/").content.decode()
    head = job_page.split('id="job-run-state"', 1)[1].split("</span>\n", 1)[0]
    assert "not running" not in head and "status-failed" in head
    assert "the query failed: ValueError: bad row" in head
    listing = client.get("/").content.decode()
    row = listing.split(f'href="/jobs/{live_run.job_id}/"', 1)[1].split("</tr>", 1)[0]
    assert "not running" not in row and "status-failed" in row
    assert "the query failed: ValueError: bad row" in row
    # A failed run is not a running one.
    assert live_run.job.name not in client.get("/?state=running").content.decode()


# ---- 2. controls match what the server accepts ----------------------------------------------

@pytest.mark.parametrize("status", ["stopped", "failed"])
def test_an_ended_run_offers_no_controls(session_client, live_run, status):
    from webapp.jobs.models import Run
    from webapp.reconfigurations.services import reconfiguration_request

    reconfiguration, _ = reconfiguration_request(
        run_id=live_run.pk, actor=None, trigger="user",
        body={"kind": "rescale", "operator": "counts", "parallelism": 3, "reason": "r",
              "request_id": "r1"})
    Run.objects.filter(pk=live_run.pk).update(
        status=status, autoscale_mode="recommend",
        autoscale_proposal={"changes": {"counts": 4}, "reasons": {"counts": "behind"}})
    reconfiguration.status = "applied"
    reconfiguration.save()
    page = session_client(Role.OPERATOR).get(f"/runs/{live_run.pk}/").content.decode()
    for control in ('data-policy="scale_out"', 'data-policy="scale_in"', "data-rollback=",
                    'id="autoscale-mode"', "data-recommend-op", 'id="stop-open"',
                    'id="stop-dialog"'):
        assert control not in page, control
    assert f"The run is {status}: nothing to scale." in page


def test_a_live_run_offers_stop_with_a_reason_and_the_policy_field_has_the_server_s_bounds(
    session_client, live_run
):
    from tests.webapp.conftest import epoch_metrics
    from webapp import engine_gateway
    from webapp.jobs.metrics import run_epoch_record

    operator = session_client(Role.OPERATOR)
    page = operator.get(f"/runs/{live_run.pk}/").content.decode()
    assert 'id="stop-open"' in page and 'id="stop-dialog"' in page
    stop_form = page.split('id="stop-form"', 1)[1].split("</form>", 1)[0]
    assert 'name="reason"' in stop_form and "required" in stop_form
    # events (a clock source) and counts may grow to the 16 key groups; views is pinned
    # nowhere but filter may grow too; the sink may not: the bound is the sum of headroom.
    room = engine_gateway.dag_headroom(live_run.target_dag)
    assert room == {"add": 15 + 15 + 14, "remove": 1}
    # Before any epoch nothing is measured: none is offered to add, and the field says why.
    field = page.split('id="policy-instances"', 1)[1].split(">", 1)[0]
    assert 'data-add-max="0"' in field and "no epoch has been measured yet" in field
    assert f'data-remove-max="{room["remove"]}"' in field
    # Once counts is measured over its capacity, as many as the policy places, within room.
    for epoch in (1, 2, 3):
        run_epoch_record(run_id=live_run.pk, metrics=epoch_metrics(
            epoch, counts_in=3000.0, counts_capacity=2000.0))
    page = operator.get(f"/runs/{live_run.pk}/").content.decode()
    field = page.split('id="policy-instances"', 1)[1].split(">", 1)[0]
    placed = int(field.split('data-add-max="', 1)[1].split('"', 1)[0])
    assert 1 <= placed <= room["add"] and f'max="{placed}"' in field


def test_the_policy_refuses_more_instances_than_can_be_placed_with_a_readable_message(
    token_client, live_run
):
    client = token_client(Role.OPERATOR)
    response = client.post(f"/api/runs/{live_run.pk}/reconfigurations", data=json.dumps(
        {"kind": "scale_in", "instances": 5, "reason": "r", "request_id": "in-5"}),
        content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == (
        "field instances: at most 1 instance(s) can be removed now (asked for 5)")


def test_the_preview_runs_the_same_checks_as_applying(session_client, live_run):
    from webapp.jobs.models import Run

    client = session_client(Role.OPERATOR)
    body = {"kind": "rescale", "operator": "counts", "parallelism": "3", "reason": "r",
            "request_id": "p1"}
    assert "data-refused" not in client.post(
        f"/runs/{live_run.pk}/scale/preview", body).content.decode()
    Run.objects.filter(pk=live_run.pk).update(status="stopped")
    preview = client.post(f"/runs/{live_run.pk}/scale/preview", body).content.decode()
    applied = client.post(f"/runs/{live_run.pk}/reconfigure", body).content.decode()
    message = f"Run {live_run.pk} is stopped: only a live run can be reconfigured"
    assert "data-refused" in preview and message in preview
    assert "data-refused" in applied and message in applied


def test_a_refused_preview_reads_as_a_sentence(session_client, live_run):
    client = session_client(Role.OPERATOR)
    preview = client.post(f"/runs/{live_run.pk}/scale/preview", {
        "kind": "rescale", "operator": "out", "parallelism": "2", "reason": "r",
        "request_id": "p2"}).content.decode()
    assert "data-refused" in preview
    assert "Operator: &#x27;out&#x27; cannot change live" in preview
    assert "field operator" not in preview


def test_policy_scale_out_never_places_an_instance_on_a_sink(live_run):
    from webapp import engine_gateway

    rates = {"events": {"output_rate": 1000.0, "processing_rate": 1e6},
             "views": {"input_rate": 1000.0, "processing_rate": 1e6, "output_rate": 900.0},
             "counts": {"input_rate": 900.0, "processing_rate": 1e6, "output_rate": 900.0},
             "out": {"input_rate": 900.0, "processing_rate": 100.0, "output_rate": 100.0}}
    with pytest.raises(Exception, match="no operator that may take another instance"):
        engine_gateway.plan_scale_out_instances(live_run.target_dag, rates=rates, instances=1)


def test_stop_through_the_page_takes_a_reason_and_answers_in_the_dialog(
    session_client, live_run
):
    from webapp.audit.models import AuditEntry

    client = session_client(Role.OPERATOR)
    too_long = client.post(f"/runs/{live_run.pk}/stop", {"reason": "x" * 1001},
                           HTTP_HX_REQUEST="true")
    assert too_long.status_code == 200 and "data-refused" in too_long.content.decode()
    assert "Reason must be at most 1000 characters" in too_long.content.decode()
    done = client.post(f"/runs/{live_run.pk}/stop", {"reason": "replaced by v2"},
                       HTTP_HX_REQUEST="true").content.decode()
    assert f'data-stop-requested="{live_run.pk}"' in done and "stopping" in done
    entry = AuditEntry.objects.get(run_id_ref=live_run.pk, action="run.stopped")
    assert entry.reason == "replaced by v2"


# ---- 3. bounds instead of server errors ------------------------------------------------------

def test_a_stop_reason_over_the_bound_is_a_400_not_a_500(token_client, live_run):
    response = token_client(Role.OPERATOR).post(
        f"/api/runs/{live_run.pk}/stop", data=json.dumps({"reason": "r" * 20_000}),
        content_type="application/json")
    assert response.status_code == 400
    assert "at most 1000" in response.json()["error"]


def test_job_names_comments_and_numeric_params_are_bounded(token_client, simple_dag):
    client = token_client(Role.EDITOR)

    def post(dag, comment=""):
        return client.post(f"/api/jobs?comment={comment}", data=json.dumps(dag),
                           content_type="application/json")

    long_name = post({**simple_dag, "name": "n" * 201})
    assert long_name.status_code == 400 and "at most 200" in long_name.json()["error"] + str(
        long_name.json().get("problems"))
    fast = json.loads(json.dumps(simple_dag))
    fast["operators"][0]["params"]["rows_per_second"] = 10**20
    answer = post(fast)
    assert answer.status_code == 400
    problem = answer.json()["problems"][0]
    assert problem["where"] == "operator 'events'"
    assert problem["message"] == (
        "param 'rows_per_second': must be at most 10,000,000, got 100000000000000000000")
    assert post(simple_dag).status_code == 201
    duplicate = post(simple_dag)
    assert duplicate.status_code == 409
    assert duplicate.json()["error"] == "a job named 'clicks' already exists"


def test_a_long_reason_wraps_in_history_instead_of_widening_the_page(session_client, live_run):
    from webapp.audit.services import audit_record

    audit_record(actor=None, trigger="user", action="run.stopped", subject=live_run,
                 reason="w" * 2000, outcome="done")
    page = session_client(Role.VIEWER).get("/history/").content.decode()
    cell = page.split('<td class="reason">', 1)[1].split("</td>", 1)[0]
    assert '<details class="long-reason">' in cell and "w" * 2000 in cell


def test_the_editor_shows_the_bounds_of_the_name_and_key_groups(session_client):
    page = session_client(Role.EDITOR).get("/jobs/new/").content.decode()
    name = page.split('id="doc-name"', 1)[1].split(">", 1)[0]
    assert 'maxlength="200"' in name and "at most 200 characters" in page
    assert 'max="32768"' in page.split('id="doc-key-groups"', 1)[1].split(">", 1)[0]


def test_the_catalog_gives_the_editor_each_numeric_bound():
    from webapp import engine_gateway

    generator = next(t for t in engine_gateway.operator_catalog()
                     if t["type"] == "source.generator")
    rate = next(p for p in generator["params"] if p["name"] == "rows_per_second")
    assert rate["maximum"] == 10_000_000


# ---- 6. the autoscaler's leftovers ----------------------------------------------------------

def test_mode_off_and_a_run_s_end_clear_the_recommendations(token_client, session_client,
                                                           live_run):
    from webapp.audit.models import AuditEntry
    from webapp.jobs.models import Run, RunStatus
    from webapp.runs.services import run_status_set

    stale = {"changes": {"counts": 4}, "reasons": {"counts": "behind"}}
    client = token_client(Role.OPERATOR)

    def configure(mode):
        return client.post(f"/api/runs/{live_run.pk}/autoscale", data=json.dumps(
            {"mode": mode}), content_type="application/json")

    assert configure("recommend").status_code == 200
    Run.objects.filter(pk=live_run.pk).update(autoscale_proposal=stale)
    viewer = session_client(Role.VIEWER)
    assert "counts</code> → 4" in viewer.get(f"/runs/{live_run.pk}/").content.decode()
    assert configure("off").status_code == 200
    assert Run.objects.get(pk=live_run.pk).autoscale_proposal == {}
    reasons = list(AuditEntry.objects.filter(action="autoscale.configured")
                   .order_by("at").values_list("reason", flat=True))
    assert reasons[0].startswith("mode recommend:") and reasons[1].startswith("mode off:")

    Run.objects.filter(pk=live_run.pk).update(autoscale_mode="recommend",
                                              autoscale_proposal=stale)
    run_status_set(run_id=live_run.pk, status=RunStatus.STOPPED)
    assert Run.objects.get(pk=live_run.pk).autoscale_proposal == {}
    assert "Pending recommendations" not in viewer.get(f"/runs/{live_run.pk}/").content.decode()


def test_history_offers_each_actor_once(session_client, live_run):
    from webapp.audit.services import audit_record

    for _ in range(5):
        audit_record(actor=None, trigger="policy", action="run.recovering", subject=live_run,
                     outcome="recovering")
    page = session_client(Role.VIEWER).get("/history/").content.decode()
    actors = page.split('name="actor"', 1)[1].split("</select>", 1)[0]
    assert actors.count("<option>policy</option>") == 1
