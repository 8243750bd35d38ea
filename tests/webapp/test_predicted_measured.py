"""A change keeps the prediction its preview makes when it is requested, and once the epochs
after it are measured, the API and the history page show the prediction beside what those
epochs measured, in the same terms (capacity, ETP, backlog drain, throughput); a change the
model predicts nothing for says so."""

from __future__ import annotations

import json
import re

import pytest

from engine.api import Ack
from tests.webapp.conftest import epoch_metrics
from webapp.jobs.models import Reconfiguration
from webapp.reconfigurations.services import reconfiguration_acknowledge
from webapp.runs.live import run_epoch_publish

pytestmark = pytest.mark.django_db(transaction=True)

OFFERED = 27000.0  # rows/s the source is offered; the keyed operator gets a third


def _publish(run, epochs, *, capacity: float, instances: int, backlog: int,
             growth: float) -> None:
    """Epochs as a driver publishes them: ``counts`` processing up to ``capacity`` rows/s
    with ``instances``, the source's backlog at ``backlog`` and growing by ``growth``."""
    for epoch in epochs:
        metrics = epoch_metrics(epoch, counts_in=OFFERED / 3, counts_capacity=capacity,
                                instances=instances)
        metrics["operators"]["counts"]["busy_ms"] = [900.0 * OFFERED / 3 / capacity] * instances
        metrics.update(interval_ms=1000.0, backlog_rows=backlog, sources={"events": {
            "offered": OFFERED, "consumed": OFFERED - growth, "backlog": backlog,
            "backlog_growth_per_s": growth}})
        run_epoch_publish(run_id=run.pk, metrics=metrics)


def _request(client, run, body) -> Reconfiguration:
    response = client.post(f"/api/runs/{run.pk}/reconfigurations", data=json.dumps(body),
                           content_type="application/json")
    assert response.status_code == 202, response.content
    return Reconfiguration.objects.get(pk=response.json()["id"])


def _applied(run, record: Reconfiguration, epoch: int) -> None:
    for command in record.commands:
        reconfiguration_acknowledge(run_id=run.pk, ack=Ack(
            request_id=command["request_id"], kind=command["kind"],
            operator=command.get("operator"), status="applied", applied_epoch=epoch,
            after={"parallelism": int(command["parallelism"])} if "parallelism" in command
            else {}))


def _figures(html: str) -> dict[str, tuple[str, str]]:
    rows = re.findall(r'<tr data-figure="([^"]+)"><th scope="row">[^<]+</th>'
                      r'<td data-f="predicted">([^<]*)</td><td data-f="measured">(.*?)</td>', html)
    return {figure: (predicted, measured) for figure, predicted, measured in rows}


def test_a_rescale_keeps_its_prediction_and_shows_it_beside_the_measured_epochs(
        token_client, session_client, live_run):
    _publish(live_run, range(5), capacity=4000.0, instances=2, backlog=60000, growth=3000.0)
    client = token_client("operator")
    preview = client.post(f"/api/runs/{live_run.pk}/reconfigurations/preview", data=json.dumps(
        {"kind": "rescale", "operator": "counts", "parallelism": 4, "reason": "preview"}),
        content_type="application/json").json()["predicted"]
    record = _request(client, live_run, {"kind": "rescale", "operator": "counts",
                                         "parallelism": 4, "reason": "lagging"})
    record.refresh_from_db()
    assert record.predicted == preview  # what the preview showed, kept with the change
    said = record.predicted["after"]
    assert said["capacity_rate"] > record.predicted["now"]["capacity_rate"]

    _applied(live_run, record, 5)
    history = session_client("viewer")
    waiting = _figures(history.get("/history/").content.decode())
    assert waiting["capacity"][1] == '<span class="muted">measuring…</span>'

    _publish(live_run, range(6, 12), capacity=16000.0, instances=4, backlog=20000,
             growth=-4000.0)
    answer = client.get(f"/api/reconfigurations/{record.pk}").json()
    assert answer["predicted"] == preview
    seen = answer["after"]["outlook"]
    assert seen["capacity_rate"] > record.predicted["now"]["capacity_rate"]
    assert seen["drain_s"] is not None and seen["backlog"] == 20000
    assert set(seen["etp"]) == {"events", "views", "counts", "out"}

    shown = _figures(history.get("/history/").content.decode())
    assert list(shown) == ["throughput", "capacity", "backlog drained in", "bottleneck",
                           "ETP of counts"]
    assert shown["capacity"] == (f"{_rate(said['capacity_rate'])}/s",
                                 f"{_rate(seen['capacity_rate'])}/s")
    assert shown["throughput"][1] == f"{_rate(answer['after']['throughput_rows_per_s'])}/s"
    assert shown["backlog drained in"][1].endswith(" s")
    assert shown["ETP of counts"] == (f"{said['etp']['counts']:.2f}",
                                      f"{seen['etp']['counts']:.2f}")


def test_a_change_the_model_predicts_nothing_for_says_so(token_client, session_client,
                                                          live_run):
    client = token_client("operator")
    # No measured epoch yet: nothing to predict from.
    early = _request(client, live_run, {"kind": "rescale", "operator": "counts",
                                        "parallelism": 3, "reason": "early"})
    _publish(live_run, range(5), capacity=4000.0, instances=3, backlog=0, growth=0.0)
    # A logic change keeps every operator's instances: the model does not project it.
    logic = _request(client, live_run, {"kind": "logic", "operator": "views",
                                        "params": {"condition": "event_type = 'click'"}})
    for record in (early, logic):
        assert client.get(f"/api/reconfigurations/{record.pk}").json()["predicted"] is None
    page = session_client("viewer").get("/history/").content.decode()
    assert page.count('data-testid="no-prediction"') == 2
    assert "No prediction was kept with this change" in page


def _rate(value: float) -> str:
    from webapp.pages.templatetags.pages import rate

    return rate(value)
