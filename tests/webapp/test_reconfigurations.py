"""The reconfiguration workflow on the control plane's side: validation against the plan, the
record before the command, idempotency, serialization per run, delivery on the run's control
channel, and completion from the driver's acknowledgements."""

from __future__ import annotations

import json
import uuid

import pytest
import redis
from django.conf import settings

from engine.api import Ack
from engine.runtime.control.channel import open_control_channel
from tests.webapp.conftest import epoch_metrics
from webapp.audit.models import AuditEntry
from webapp.jobs.metrics import run_epoch_record
from webapp.jobs.models import Reconfiguration, RunStatus
from webapp.reconfigurations.services import reconfiguration_acknowledge
from webapp.runs.services import run_status_set

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def operator_client(token_client):
    return token_client("operator")


@pytest.fixture(autouse=True)
def fresh_control_channels(live_run):
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(*(f"streamscale:run:{live_run.pk}:{suffix}" for suffix in ("control", "acks")))


def _post(client, run, body, path="reconfigurations"):
    return client.post(
        f"/api/runs/{run.pk}/{path}", data=json.dumps(body), content_type="application/json"
    )


def _rescale(client, run, operator: str, parallelism: int, *, reason: str, **fields):
    """``client`` asks to rescale ``operator`` of ``run`` to ``parallelism`` instances."""
    return _post(client, run, {"kind": "rescale", "operator": operator,
                               "parallelism": parallelism, "reason": reason, **fields})


def _sent(run) -> list[dict[str, str]]:
    channel = open_control_channel(settings.REDIS_URL, str(run.pk), "streamscale:")
    return [message for _, message in channel.read_after(None, 0)]


def _ack(run, message, *, epoch=12, status="applied", reason=None, after=None):
    """The driver's ack of a sent command; ``after`` is what it installed (by default what
    the command asked for)."""
    if after is None and status == "applied":
        after = {"parallelism": int(message["parallelism"])} if "parallelism" in message else {}
    return reconfiguration_acknowledge(
        run_id=run.pk,
        ack=Ack(
            request_id=message["request_id"],
            kind=message["kind"],
            operator=message.get("operator"),
            status=status,
            reason=reason,
            applied_epoch=epoch if status == "applied" else None,
            control_latency_ms=4.5,
            state_bytes_copied=0 if status == "applied" else None,
            epoch_ended_at_ms=1_700_000_000_000.0 if status == "applied" else None,
            after=after or {},
        ),
    )


def test_rescale_is_recorded_delivered_and_completed_by_the_ack(operator_client, live_run):
    response = _rescale(operator_client, live_run, "counts", 6, reason="hot campaign",
                        request_id="r-1")
    assert response.status_code == 202
    record = Reconfiguration.objects.get(pk=response.json()["id"])
    assert record.status == "pending" and record.plan_diff["affected_operators"] == ["counts"]
    (message,) = _sent(live_run)
    assert message["kind"] == "rescale" and message["parallelism"] == "6"
    assert message["request_id"] == "r-1" and float(message["requested_at"]) > 0

    _ack(live_run, message, epoch=12)
    body = operator_client.get(f"/api/reconfigurations/{record.pk}").json()
    assert body["status"] == "applied" and body["applied_epoch"] == 12
    assert body["control_latency_ms"] == 4.5 and body["state_bytes_moved"] == 0
    assert operator_client.get(f"/api/runs/{live_run.pk}").json()["parallelism"]["counts"] == 6
    entry = AuditEntry.objects.get(action="reconfiguration.rescale")
    assert entry.reason == "hot campaign" and entry.actor_name == "operator-token"
    assert entry.plan_diff["affected_operators"] == ["counts"]
    outcome = AuditEntry.objects.get(action="reconfiguration.applied")
    assert outcome.reconfiguration_id_ref == record.pk and outcome.details["applied_epoch"] == 12


def test_the_same_request_id_applies_once(operator_client, live_run):
    first = _rescale(operator_client, live_run, "counts", 4, reason="x", request_id="same")
    second = _rescale(operator_client, live_run, "counts", 4, reason="x", request_id="same")
    assert first.json()["id"] == second.json()["id"]
    assert (first.json()["created"], second.json()["created"]) == (True, False)
    assert len(_sent(live_run)) == 1 and Reconfiguration.objects.count() == 1


def test_an_ack_sent_again_after_a_later_change_changes_nothing(operator_client, live_run):
    # A driver's start sends the acks of the epochs its log kept again (one a kill kept from
    # the web app must arrive): an ack already recorded must not roll the run back.
    for request_id, parallelism, epoch in (("r-6", 6, 12), ("r-3", 3, 14)):
        body = {"kind": "rescale", "operator": "counts", "parallelism": parallelism,
                "reason": "x", "request_id": request_id}
        assert _post(operator_client, live_run, body).status_code == 202
        _ack(live_run, _sent(live_run)[-1], epoch=epoch)
    first = _sent(live_run)[0]

    _ack(live_run, first, epoch=12)

    run = operator_client.get(f"/api/runs/{live_run.pk}").json()
    assert run["parallelism"]["counts"] == 3
    records = {r.request_id: r for r in Reconfiguration.objects.all()}
    assert [len(records[r].acks) for r in ("r-6", "r-3")] == [1, 1]
    assert {r.status for r in records.values()} == {"applied"}
    assert AuditEntry.objects.filter(action="reconfiguration.applied").count() == 2


def test_conflicting_requests_apply_one_after_the_other(operator_client, token_client, live_run):
    other = token_client("admin")
    a = _rescale(operator_client, live_run, "counts", 6, reason="a")
    b = _rescale(other, live_run, "counts", 3, reason="b")
    assert a.status_code == b.status_code == 202
    first, second = Reconfiguration.objects.order_by("pk")
    assert first.plan_after == second.plan_before  # the second builds on the first
    sent = _sent(live_run)
    assert [m["parallelism"] for m in sent] == ["6", "3"]
    for epoch, message in enumerate(sent, start=20):
        _ack(live_run, message, epoch=epoch)
    live_run.refresh_from_db()
    assert live_run.parallelism["counts"] == 3
    assert [r.applied_epoch for r in Reconfiguration.objects.order_by("pk")] == [20, 21]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"operator": "counts", "parallelism": 2, "reason": "x"}, "kind"),
        ({"kind": "explode", "reason": "x"}, "kind"),
        ({"kind": "rescale", "operator": "counts", "parallelism": 3}, "reason"),
        (
            {"kind": "rescale", "operator": "counts", "parallelism": "3", "reason": "x"},
            "parallelism",
        ),
        ({"kind": "rescale", "parallelism": 3, "reason": "x"}, "operator"),
        ({"kind": "rescale", "operator": "counts", "parallelism": 0, "reason": "x"}, "parallelism"),
        (
            {"kind": "rescale", "operator": "counts", "parallelism": 17, "reason": "x"},
            "parallelism",
        ),
        ({"kind": "rescale", "operator": "ghost", "parallelism": 2, "reason": "x"}, "operator"),
        ({"kind": "scale_out", "instances": 0, "reason": "x"}, "instances"),
        ({"kind": "logic", "operator": "views"}, "params"),
        ({"kind": "rollback", "reason": "x"}, "to_reconfiguration"),
        ({"kind": "rebalance", "operator": "counts", "assignment": [0, 1]}, "assignment"),
    ],
)
def test_bad_requests_get_400_naming_the_field(operator_client, live_run, body, field):
    response = _post(operator_client, live_run, body)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]
    assert Reconfiguration.objects.count() == 0 and _sent(live_run) == []


def test_stateful_logic_change_is_refused_with_the_parameter_named(operator_client, live_run):
    params = dict(live_run.target_dag["operators"][2]["params"], window="1 minute")
    response = _post(
        operator_client, live_run, {"kind": "logic", "operator": "counts", "params": params}
    )
    assert response.status_code == 400 and "window" in response.json()["error"]


def test_the_web_app_and_the_driver_judge_a_logic_change_by_one_rule(operator_client, live_run):
    """What the API refuses, it refuses with the driver's own reason; what the driver would
    apply (a later watermark keeps the stored windows meaningful), the API sends."""
    from engine.runtime.operators.changes import logic_change_refused

    counts = live_run.target_dag["operators"][2]
    reshaped = dict(counts["params"], window="1 minute")
    reason = logic_change_refused("window_aggregate", "counts", counts["params"], reshaped)
    refused = _post(operator_client, live_run,
                    {"kind": "logic", "operator": "counts", "params": reshaped})
    assert refused.status_code == 400 and reason in refused.json()["error"]

    later = dict(counts["params"], watermark="30 seconds")
    assert logic_change_refused("window_aggregate", "counts", counts["params"], later) is None
    sent = _post(operator_client, live_run,
                 {"kind": "logic", "operator": "counts", "params": later})
    assert sent.status_code == 202, sent.content
    (message,) = _sent(live_run)
    assert message["kind"] == "logic" and "30 seconds" in message["params"]


def test_stateless_logic_change_is_delivered(operator_client, live_run):
    response = _post(
        operator_client,
        live_run,
        {"kind": "logic", "operator": "views", "params": {"condition": "event_type = 'click'"}},
    )
    assert response.status_code == 202
    (message,) = _sent(live_run)
    assert message["kind"] == "logic" and "click" in message["params"]


def test_a_refused_command_leaves_the_plan_as_it_was(operator_client, live_run):
    unknown = _post(operator_client, live_run, {
        "kind": "logic", "operator": "views", "params": {"condition": "no_such_column > 1"}})
    assert unknown.status_code == 400
    assert "unknown column 'no_such_column'" in unknown.content.decode()
    # Only Spark's analysis knows a double has no fields: the driver refuses that one.
    response = _post(
        operator_client,
        live_run,
        {"kind": "logic", "operator": "views", "params": {"condition": "amount.cents > 1"}},
    )
    assert response.status_code == 202, response.content
    (message,) = _sent(live_run)
    _ack(live_run, message, status="rejected", reason="cannot extract cents from amount")
    record = Reconfiguration.objects.get()
    assert record.status == "rejected" and "cents" in record.status_reason
    live_run.refresh_from_db()
    assert live_run.target_dag == record.plan_before


def test_a_run_that_is_not_live_cannot_be_reconfigured(operator_client, live_run):
    run_status_set(run_id=live_run.pk, status=RunStatus.STOPPED)
    response = _rescale(operator_client, live_run, "counts", 3, reason="x")
    assert response.status_code == 409 and "stopped" in response.json()["error"]


def test_a_run_that_ends_fails_its_pending_changes(operator_client, live_run):
    _rescale(operator_client, live_run, "counts", 3, reason="x")
    run_status_set(run_id=live_run.pk, status=RunStatus.FAILED, detail="driver lost")
    record = Reconfiguration.objects.get()
    assert record.status == "failed" and "failed before it took effect" in record.status_reason
    assert AuditEntry.objects.filter(action="reconfiguration.failed").count() == 1


def test_scale_out_gives_instances_to_the_congested_operator(operator_client, live_run):
    for epoch in range(5):
        run_epoch_record(
            run_id=live_run.pk, metrics=epoch_metrics(epoch, counts_in=9000, counts_capacity=4000)
        )
    preview = _post(
        operator_client,
        live_run,
        {"kind": "scale_out", "instances": 2, "reason": "lagging"},
        "reconfigurations/preview",
    )
    assert preview.status_code == 200
    assert preview.json()["parallelism_after"]["counts"] == 4
    assert "counts" in preview.json()["predicted"]["now"]["congested"]
    assert Reconfiguration.objects.count() == 0
    response = _post(
        operator_client, live_run, {"kind": "scale_out", "instances": 2, "reason": "lagging"}
    )
    assert response.status_code == 202
    assert [(m["operator"], m["parallelism"]) for m in _sent(live_run)] == [("counts", "4")]


def test_rollback_restores_the_plan_before_an_applied_change(operator_client, live_run):
    _rescale(operator_client, live_run, "counts", 5, reason="try")
    (message,) = _sent(live_run)
    _ack(live_run, message)
    first = Reconfiguration.objects.get()
    response = _post(
        operator_client,
        live_run,
        {"kind": "rollback", "reason": "worse latency", "to_reconfiguration": first.pk},
    )
    assert response.status_code == 202, response.content
    assert [(m["kind"], m["parallelism"]) for m in _sent(live_run)[1:]] == [("rescale", "2")]
    assert AuditEntry.objects.filter(action="reconfiguration.rollback").count() == 1


def test_metrics_endpoint_and_bad_since_epoch(operator_client, live_run):
    for epoch in range(3):
        run_epoch_record(
            run_id=live_run.pk, metrics=epoch_metrics(epoch, counts_in=100, counts_capacity=1000)
        )
    epochs = operator_client.get(f"/api/runs/{live_run.pk}/metrics?since_epoch=1").json()["epochs"]
    assert [e["epoch"] for e in epochs] == [1, 2]
    assert epochs[0]["operators"]["counts"]["instances"] == 2
    bad = operator_client.get(f"/api/runs/{live_run.pk}/metrics?since_epoch=x")
    assert bad.status_code == 400 and "since_epoch" in bad.json()["error"]


def test_request_ids_are_unique_per_run_not_globally(operator_client, live_run):
    response = _rescale(operator_client, live_run, "counts", 3, reason="x",
                        request_id=uuid.uuid4().hex)
    assert response.json()["created"] is True


def test_applied_at_is_when_the_first_epoch_with_the_change_ended(operator_client, live_run):
    _rescale(operator_client, live_run, "counts", 4, reason="x")
    (message,) = _sent(live_run)
    _ack(live_run, message, epoch=15)
    body = operator_client.get(f"/api/reconfigurations/{Reconfiguration.objects.get().pk}").json()
    assert body["applied_at"].startswith("2023-11-14T22:13:20")  # the ack's epoch_ended_at_ms
    assert body["acks"][0]["epoch_ended_at_ms"] == 1_700_000_000_000.0


def test_a_partial_apply_leaves_the_run_as_the_driver_acknowledged(operator_client, live_run):
    """A rollback sends two commands; the driver applies the logic change and refuses the
    rescale: the record fails, and the run's plan, parallelism and target say exactly that."""
    _rescale(operator_client, live_run, "counts", 5, reason="a")
    _ack(live_run, _sent(live_run)[0])
    _post(operator_client, live_run,
          {"kind": "logic", "operator": "views", "params": {"condition": "event_type = 'click'"},
           "reason": "b"})
    logic = _sent(live_run)[1]
    _ack(live_run, logic, after={"parallelism": 1, "params": json.loads(logic["params"])})
    rollback = _post(operator_client, live_run,
                     {"kind": "rollback", "to_version": 1, "reason": "undo both"}).json()
    back_logic, back_rescale = _sent(live_run)[2:]
    original = json.loads(back_logic["params"])
    _ack(live_run, back_logic, after={"parallelism": 1, "params": original})
    _ack(live_run, back_rescale, status="rejected", reason="no")
    record = Reconfiguration.objects.get(pk=rollback["id"])
    assert record.status == "failed"
    live_run.refresh_from_db()
    ops = {op["id"]: op for op in live_run.target_dag["operators"]}
    assert ops["views"]["params"] == original and ops["counts"]["parallelism"] == 5
    api = operator_client.get(f"/api/runs/{live_run.pk}").json()
    assert api["parallelism"]["counts"] == 5


def test_a_rebalance_that_lowers_parallelism_is_what_the_run_records(operator_client, live_run):
    owners = [0] * 8 + [1] * 8
    _rescale(operator_client, live_run, "counts", 3, reason="a")
    _ack(live_run, _sent(live_run)[0])
    response = _post(operator_client, live_run, {"kind": "rebalance", "operator": "counts",
                                                 "assignment": owners, "reason": "b"})
    assert response.status_code == 202, response.content
    ranges = [[0, 7, 0], [8, 15, 1]]
    _ack(live_run, _sent(live_run)[1], after={"parallelism": 2, "ranges": ranges})
    live_run.refresh_from_db()
    assert live_run.parallelism["counts"] == 2 and live_run.assignment["counts"] == ranges
    counts = next(op for op in live_run.target_dag["operators"] if op["id"] == "counts")
    assert counts["parallelism"] == 2
    api = operator_client.get(f"/api/runs/{live_run.pk}").json()
    assert api["parallelism"]["counts"] == 2 and api["assignment"]["counts"] == ranges
    page = operator_client.get(f"/runs/{live_run.pk}/")
    assert page.status_code == 200
    config = json.loads(page.content.decode().split('id="run-config"', 1)[1]
                        .split(">", 1)[1].split("</script>", 1)[0])
    assert config["parallelism"]["counts"] == 2 and config["assignment"]["counts"] == ranges


def test_a_sink_cannot_be_rescaled_and_the_answer_says_why(operator_client, live_run):
    response = _rescale(operator_client, live_run, "out", 2, reason="more sink instances",
                        request_id="sink-1")
    assert response.status_code == 400
    assert "'out' cannot change live" in response.json()["error"]
    assert Reconfiguration.objects.count() == 0


def test_the_generator_source_rescales_like_any_operator(operator_client, live_run):
    response = _rescale(operator_client, live_run, "events", 2,
                        reason="the source is the bottleneck", request_id="src-1")
    assert response.status_code == 202
    (message,) = _sent(live_run)
    assert message["kind"] == "rescale" and message["operator"] == "events"


def _in_thread(work):
    """Runs ``work`` on another thread, so on its own database connection; returns what it
    returned or raised."""
    import threading

    from django.db import connection

    outcome: dict[str, object] = {}

    def target():
        try:
            outcome["value"] = work()
        except Exception as error:  # noqa: BLE001 - handed back to the test
            outcome["value"] = error
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=30)
    return outcome["value"]


def _lock_now(run_id: int) -> str:
    from django.db import DatabaseError, transaction

    from webapp.jobs.models import Run

    try:
        with transaction.atomic():
            Run.objects.select_for_update(nowait=True).get(pk=run_id)
    except DatabaseError:
        return "locked"
    return "free"


@pytest.mark.parametrize("warm", [False, True])
def test_a_logic_change_plans_before_it_locks_its_run_and_a_rescale_under_the_lock(
        operator_client, live_run, monkeypatch, warm):
    """Planning can take seconds (an expression check may start Spark's parser, or load more
    of it); the driver's acknowledgements and live figures must not wait for it. A logic
    change brings expressions of its own: always planned before the lock. A rescale reads the
    target as stored and asks the parser nothing, warm or not: it plans under the lock,
    saving the request a read of its run."""
    from webapp import engine_gateway

    seen: list[tuple[str, str]] = []

    def observed(kind, plan):
        def planned(*args, **kwargs):
            seen.append((kind, _in_thread(lambda: _lock_now(live_run.pk))))
            return plan(*args, **kwargs)
        return planned

    monkeypatch.setattr(engine_gateway, "parser_warm", lambda: warm)
    monkeypatch.setattr(engine_gateway, "plan_logic",
                        observed("logic", engine_gateway.plan_logic))
    monkeypatch.setattr(engine_gateway, "plan_rescale",
                        observed("rescale", engine_gateway.plan_rescale))
    params = dict(live_run.target_dag["operators"][2]["params"], watermark="30 seconds")
    logic = {"kind": "logic", "operator": "counts", "params": params, "reason": "x"}
    assert _post(operator_client, live_run, logic).status_code == 202
    rescale = {"kind": "rescale", "operator": "counts", "parallelism": 5, "reason": "x"}
    assert _post(operator_client, live_run, rescale).status_code == 202
    assert seen == [("logic", "free"), ("rescale", "locked")]
    assert [m["kind"] for m in _sent(live_run)] == ["logic", "rescale"]


def test_an_epoch_is_recorded_while_a_request_holds_its_run(
        operator_client, live_run, monkeypatch):
    """The run's lock serializes requests and acknowledgements, not the driver's epochs:
    their rows reference the run, and a key-share lock on it must not wait."""
    from django.db import connection

    from webapp.reconfigurations import services

    record, recorded = services._record, []

    def epoch_meanwhile():
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '3s'")
        return run_epoch_record(run_id=live_run.pk, metrics=epoch_metrics(
            11, counts_in=100.0, counts_capacity=1000.0))

    def while_locked(*args, **kwargs):
        recorded.append(_in_thread(epoch_meanwhile))
        return record(*args, **kwargs)

    monkeypatch.setattr(services, "_record", while_locked)
    body = {"kind": "rescale", "operator": "counts", "parallelism": 3, "reason": "x"}
    assert _post(operator_client, live_run, body).status_code == 202
    assert recorded == [True]


def test_a_request_whose_run_changed_after_its_draft_plans_again(
        operator_client, token_client, live_run, monkeypatch):
    """A request drafted against a target that another request then changed builds on the
    new target, as if it had come after it."""
    from webapp import engine_gateway

    plan, other = engine_gateway.plan_logic, token_client("admin")
    interleaved = []

    def another_request_first(*args, **kwargs):
        if not interleaved:
            interleaved.append(True)
            body = {"kind": "rescale", "operator": "views", "parallelism": 4, "reason": "b"}
            assert _in_thread(lambda: _post(other, live_run, body).status_code) == 202
        return plan(*args, **kwargs)

    monkeypatch.setattr(engine_gateway, "plan_logic", another_request_first)
    params = dict(live_run.target_dag["operators"][2]["params"], watermark="30 seconds")
    body = {"kind": "logic", "operator": "counts", "params": params, "reason": "a"}
    assert _post(operator_client, live_run, body).status_code == 202
    first, second = Reconfiguration.objects.order_by("pk")
    assert (first.reason, second.reason) == ("b", "a")
    assert second.plan_before == first.plan_after
    live_run.refresh_from_db()
    operators = {op["id"]: op for op in live_run.target_dag["operators"]}
    assert operators["views"]["parallelism"] == 4
    assert operators["counts"]["params"]["watermark"] == "30 seconds"


def test_the_server_starts_the_expression_parser_before_its_first_request():
    """A server prepared at start (``webapp.asgi``) has the parser running in the background,
    so its first rescale does not start it."""
    from engine.dag.expressions import set_expression_parser
    from webapp import engine_gateway

    parsed = []
    set_expression_parser(lambda text: parsed.append(text) or ())
    try:
        assert not engine_gateway.parser_warm()
        engine_gateway.prepare().join(timeout=60)
        assert engine_gateway.parser_warm()
    finally:
        set_expression_parser(None)
    assert len(parsed) == 1 and "CASE WHEN" in parsed[0]
    assert not engine_gateway.parser_warm()  # another parser starts cold


def test_a_rescale_does_not_check_its_runs_expressions_again(operator_client, live_run):
    """The run's target was checked whole when it became the target: a rescale, and the
    diff it records, read it as stored, so a web server process that never saw the job does
    not ask Spark's parser about its expressions before the record (their first check in a
    process cost the request ~18 ms, under the run's lock). A logic change still checks the
    expressions it brings."""
    from engine.dag.expressions import set_expression_parser
    from webapp import engine_gateway

    parsed = []
    set_expression_parser(lambda text: parsed.append(text) or ())
    try:
        body = {"kind": "rescale", "operator": "counts", "parallelism": 3, "reason": "x"}
        assert _post(operator_client, live_run, body).status_code == 202
        assert parsed == []
        record = Reconfiguration.objects.get()
        assert record.plan_diff["affected_operators"] == ["counts"]
        assert [m["parallelism"] for m in _sent(live_run)] == ["3"]
        live_run.refresh_from_db()
        target = live_run.target_dag  # what the run page and an ETP request read
        headroom = engine_gateway.dag_headroom(target)
        assert headroom["remove"] == 2 and headroom["add"] > 0  # counts 3 -> 1
        assert engine_gateway.dag_state_kinds(target)["counts"] == "keyed"
        assert engine_gateway.dag_limits(target)["counts"]["max"] > 3
        assert list(engine_gateway.dag_assignment(target)) == ["counts"]
        assert parsed == []
        views = dict(live_run.target_dag["operators"][1]["params"],
                     condition="event_type = 'click'")
        body = {"kind": "logic", "operator": "views", "params": views, "reason": "y"}
        assert _post(operator_client, live_run, body).status_code == 202
        assert "event_type = 'click'" in parsed
    finally:
        set_expression_parser(None)


def test_a_request_answers_busy_when_its_run_stays_locked(operator_client, live_run, monkeypatch):
    """A request waits a bounded time for its run: past it, a 503 with Retry-After that
    says why, and nothing recorded or sent."""
    import threading

    from django.db import transaction

    from webapp.jobs.models import Run
    from webapp.reconfigurations import services

    monkeypatch.setattr(services, "RUN_LOCK_WAIT_MS", 300)
    held, release = threading.Event(), threading.Event()

    def hold():
        with transaction.atomic():
            Run.objects.select_for_update().get(pk=live_run.pk)
            held.set()
            release.wait(timeout=10)

    holder = threading.Thread(target=lambda: _in_thread(hold))
    holder.start()
    try:
        assert held.wait(timeout=10)
        body = {"kind": "rescale", "operator": "counts", "parallelism": 3, "reason": "x"}
        response = _post(operator_client, live_run, body)
    finally:
        release.set()
        holder.join(timeout=10)
    assert response.status_code == 503, response.content
    assert f"run {live_run.pk} is busy" in response.json()["error"]
    assert response["Retry-After"]
    assert Reconfiguration.objects.count() == 0 and _sent(live_run) == []
    assert _post(operator_client, live_run, body).status_code == 202  # free again
