"""The autoscaler's bounds from the run page: min, max and cooldown set by an operator, bounded
by the server (max by the job's key groups), shown by the form, refusals shown as their
message with what was typed kept."""

from __future__ import annotations

import json

import pytest

from webapp.accounts.roles import Role

pytestmark = pytest.mark.django_db


def _set(client, run, **fields):
    body = {"mode": "recommend", "min": "1", "max": "", "cooldown_s": "60", **fields}
    return client.post(f"/runs/{run.pk}/autoscale/set", body, HTTP_HX_REQUEST="true")


def test_the_form_shows_the_bounds_the_server_enforces(session_client, live_run):
    html = session_client(Role.OPERATOR).get(f"/runs/{live_run.pk}/autoscale").content.decode()
    # The job has 16 key groups: no operator can take more instances.
    assert 'id="autoscale-min" name="min" type="number" inputmode="numeric" required min="1" ' \
           'max="16"' in html
    assert 'id="autoscale-max" name="max" type="number" inputmode="numeric" min="1" max="16"' \
        in html
    assert 'name="cooldown_s" type="number" inputmode="numeric" required min="1" max="86400"' \
        in html
    assert 'value="60"' in html and "Instances per operator from 1 to 16" in html


def test_an_operator_sets_min_max_and_cooldown_and_it_is_audited(session_client, live_run):
    from webapp.audit.models import AuditEntry

    html = _set(session_client(Role.OPERATOR), live_run, min="2", max="6",
                cooldown_s="120").content.decode()
    live_run.refresh_from_db()
    assert (live_run.autoscale_mode, live_run.autoscale_min, live_run.autoscale_max,
            live_run.autoscale_cooldown_s) == ("recommend", 2, 6, 120)
    assert 'value="recommend" selected' in html and 'name="max"' in html and 'value="6"' in html
    assert "From 2 to 6 instances per operator" in html and "waits 120 s" in html
    entry = AuditEntry.objects.filter(action="autoscale.configured").latest("id")
    assert entry.details == {"mode": "recommend", "min": 2, "max": 6, "cooldown_s": 120}
    assert entry.reason == "mode recommend: 2 to 6 instances per operator, 120 s cooldown"


def test_emptying_max_lifts_it_to_the_key_group_limit(session_client, live_run):
    client = session_client(Role.OPERATOR)
    _set(client, live_run, max="4")
    html = _set(client, live_run, max="").content.decode()
    live_run.refresh_from_db()
    assert live_run.autoscale_max is None
    assert "From 1 to the key-group limit of instances" in html


def test_a_mode_change_without_bounds_keeps_them(session_client, live_run):
    client = session_client(Role.OPERATOR)
    _set(client, live_run, min="3", max="5", cooldown_s="90")
    client.post(f"/runs/{live_run.pk}/autoscale/set", {"mode": "auto"}, HTTP_HX_REQUEST="true")
    live_run.refresh_from_db()
    assert (live_run.autoscale_mode, live_run.autoscale_min, live_run.autoscale_max,
            live_run.autoscale_cooldown_s) == ("auto", 3, 5, 90)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max": "17"}, "Max must be at most 16, the job&#x27;s key groups"),
        ({"min": "40"}, "Min must be at most 16, the job&#x27;s key groups"),
        ({"min": "5", "max": "3"}, "Max must not be below min (5)"),
        ({"min": "0"}, "Min must be a whole number from 1 to 32768"),
        ({"min": ""}, "Min must be a whole number from 1 to 32768"),
        ({"cooldown_s": "1.5"}, "Cooldown s must be a whole number from 1 to 86400"),
        ({"cooldown_s": "86401"}, "Cooldown s must be a whole number from 1 to 86400"),
        ({"mode": "sometimes"}, "Mode must be one of off, recommend, auto"),
    ],
)
def test_bounds_out_of_range_are_refused_with_their_message(session_client, live_run, fields,
                                                             message):
    from webapp.audit.models import AuditEntry

    html = _set(session_client(Role.OPERATOR), live_run, **fields).content.decode()
    alert = html.split('role="alert"')[1].split("</p>")[0]
    assert message in alert
    live_run.refresh_from_db()
    assert (live_run.autoscale_mode, live_run.autoscale_min, live_run.autoscale_max,
            live_run.autoscale_cooldown_s) == ("off", 1, None, 60)
    assert not AuditEntry.objects.filter(action="autoscale.configured").exists()
    # What was typed stays in the form, to be corrected.
    for name, value in fields.items():
        if name != "mode" and value:
            assert f'name="{name}"' in html and f'value="{value}"' in html


def test_the_api_bounds_max_by_key_groups_and_lifts_it_with_null(token_client, live_run):
    client = token_client(Role.OPERATOR)

    def configure(**body):
        return client.post(f"/api/runs/{live_run.pk}/autoscale", data=json.dumps(body),
                           content_type="application/json")

    refused = configure(mode="auto", max=17)
    assert refused.status_code == 400
    assert refused.json()["problems"] == [{
        "where": "field max",
        "message": "must be at most 16, the job's key groups (no operator can take more "
                   "instances)"}]
    assert configure(mode="auto", max=16).json()["max"] == 16
    assert configure(mode="auto", max=None).json()["max"] is None


def test_viewers_see_the_bounds_without_a_form(session_client, live_run):
    from webapp.jobs.models import Run

    Run.objects.filter(pk=live_run.pk).update(autoscale_mode="auto", autoscale_min=2,
                                              autoscale_max=8, autoscale_cooldown_s=30)
    html = session_client(Role.VIEWER).get(f"/runs/{live_run.pk}/autoscale").content.decode()
    assert "From 2 to 8 instances per operator, 30 s cooldown" in html
    assert "autoscale-form" not in html and "autoscale-min" not in html
