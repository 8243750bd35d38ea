"""A run's views beyond its live page: the epochs (newest first, a page at a time), the
instances of a keyed operator (busy share, rows, key groups owned, skew, congestion over
time), its exceptions and restarts; and the event-time figures the live page shows."""

from __future__ import annotations

import copy
import re

import pytest

from tests.webapp.conftest import epoch_metrics
from webapp.accounts.roles import Role

pytestmark = pytest.mark.django_db

NOW_MS = 1_700_000_000_000.0


def _keyed_epoch(epoch: int, *, rows: list[int], busy: list[float], congested: bool = False,
                 watermark_ms: float | None = None) -> dict:
    """An epoch whose `counts` (keyed) reports rows and busy time per instance and its
    event-time progress, as the driver's metrics do."""
    metrics = epoch_metrics(epoch, counts_in=sum(rows), counts_capacity=5000.0,
                            instances=len(rows))
    metrics["interval_ms"] = 1000.0
    counts = metrics["operators"]["counts"]
    counts.update(busy_ms=busy, rows_in=sum(rows), rows_in_per_instance=rows,
                  congested=congested)
    if watermark_ms is not None:
        counts.update(watermark_ms=watermark_ms, max_event_ms=watermark_ms + 5000.0,
                      watermark_delay_ms=7000.0, watermark_lag_ms=5000.0,
                      state_bytes_read=12_345, state_bytes_written=6_789)
    return metrics


def _record(run, metrics: dict) -> None:
    from webapp.jobs.metrics import run_epoch_record

    metrics["operators"]["events"]["rows_in"] = None  # a source's, as the driver reports it
    assert run_epoch_record(run_id=run.pk, metrics=metrics, sinks=frozenset({"out"}))


def _applied_change(run, epoch: int):
    from webapp.jobs.models import Reconfiguration, ReconfigurationStatus

    return Reconfiguration.objects.create(
        run=run, request_id=f"r{epoch}", kind="rescale", operators=["counts"], reason="more",
        status=ReconfigurationStatus.APPLIED, applied_epoch=epoch)


# ---- epochs ---------------------------------------------------------------------------------

def test_the_epoch_view_lists_epochs_newest_first_a_page_at_a_time(session_client, live_run):
    for epoch in range(1, 56):
        _record(live_run, epoch_metrics(epoch, counts_in=100.0 + epoch, counts_capacity=500.0))
    change = _applied_change(live_run, 54)
    client = session_client(Role.VIEWER)

    first = client.get(f"/runs/{live_run.pk}/epochs/").content.decode()
    epochs = [int(e) for e in re.findall(r'<tr data-epoch="(\d+)"', first)]
    assert epochs == list(range(55, 5, -1))  # 50, newest first
    row = first.split('<tr data-epoch="54">', 1)[1].split("</tr>", 1)[0]
    # epoch, duration, rows in (what the sources emitted), rows out (what reached the sink)
    assert "1000 ms" in row and "<td>462</td>" in row and "<td>10</td>" in row
    assert "committed" in row and f"#{change.pk} rescale counts" in row
    assert 'href="?before=6"' in first and "Newer" not in first

    older = client.get(f"/runs/{live_run.pk}/epochs/?before=6").content.decode()
    assert [int(e) for e in re.findall(r'<tr data-epoch="(\d+)"', older)] == [5, 4, 3, 2, 1]
    assert 'href="?before=56"' in older and "Older" not in older


def test_a_run_without_epochs_says_so(session_client, live_run):
    page = session_client(Role.VIEWER).get(f"/runs/{live_run.pk}/epochs/").content.decode()
    assert "No epoch recorded yet." in page and 'aria-current="page">Epochs' in page


# ---- instances of a keyed operator ----------------------------------------------------------

def test_the_instance_view_shows_busy_share_rows_key_groups_skew_and_congestion(
    session_client, live_run
):
    live_run.assignment = {"counts": [[0, 11, 0], [12, 15, 1]]}
    live_run.save(update_fields=["assignment"])
    _record(live_run, _keyed_epoch(1, rows=[300, 100], busy=[600.0, 200.0]))
    _record(live_run, _keyed_epoch(2, rows=[500, 100], busy=[900.0, 100.0], congested=True))

    page = session_client(Role.VIEWER).get(
        f"/runs/{live_run.pk}/operators/counts/instances/").content.decode()
    table = _section(page, 'data-testid="instances"')
    first = table.split('<tr data-instance="0">', 1)[1].split("</tr>", 1)[0]
    second = table.split('<tr data-instance="1">', 1)[1].split("</tr>", 1)[0]
    assert '<span class="kg-count">12</span>' in first and "(0–11)" in first
    assert '<span class="kg-count">4</span>' in second and "(12–15)" in second
    assert "75%" in first and "<td>800</td>" in first and "80%" in first  # busy, rows, share
    assert "15%" in second and "<td>200</td>" in second and "20%" in second
    # rows: 800 against a mean of 500; busy: 0.75 against a mean of 0.45
    assert _testid(page, "rows-skew") == "1.60×" and _testid(page, "busy-skew") == "1.67×"
    assert _testid(page, "congested-epochs") == "1 of 2 epochs"
    timeline = _section(page, 'data-testid="timeline"')
    assert [int(e) for e in re.findall(r'<tr data-epoch="(\d+)"', timeline)] == [2, 1]
    newest = timeline.split('<tr data-epoch="2"', 1)[1].split("</tr>", 1)[0]
    assert '<td class="hot">90%</td>' in newest and "congested" in newest


def test_the_instance_view_is_only_for_keyed_operators(session_client, live_run):
    client = session_client(Role.VIEWER)
    assert client.get(f"/runs/{live_run.pk}/operators/views/instances/").status_code == 404
    assert client.get(f"/runs/{live_run.pk}/operators/nope/instances/").status_code == 404
    # Before the driver acknowledged an assignment, the one the run started with is shown.
    page = client.get(f"/runs/{live_run.pk}/operators/counts/instances/").content.decode()
    assert page.count('class="kg-count">8<') == 2


# ---- exceptions and restarts ----------------------------------------------------------------

def test_the_exceptions_view_shows_failure_restarts_and_refused_changes(session_client,
                                                                       live_run):
    from tests.webapp.test_honest_pages import _fail
    from webapp.jobs.models import Reconfiguration, ReconfigurationStatus

    Reconfiguration.objects.create(
        run=live_run, request_id="x", kind="rescale", operators=["out"], reason="try",
        status=ReconfigurationStatus.REJECTED,
        status_reason="'out' is a sink: it cannot change live\nmore detail")
    run = _fail(live_run, restarts=2)
    client = session_client(Role.VIEWER)
    page = client.get(f"/runs/{run.pk}/exceptions/").content.decode()
    failure = _section(page, 'id="run-failure"')
    assert "driver 42 exited with code 1: the query failed: ValueError: bad row" in failure
    assert "<summary>The driver's last output</summary>" in failure
    assert _section(page, 'id="run-restarts"').count("<li>") == 2
    refused = _section(page, 'id="refused-changes"')
    assert "&#x27;out&#x27; is a sink: it cannot change live</td>" in refused
    assert "more detail" not in refused
    # The run page links to it and counts what happened: a failure and two restarts.
    overview = client.get(f"/runs/{run.pk}/").content.decode()
    assert re.search(r'href="/runs/\d+/exceptions/">Exceptions and restarts <span '
                     r'class="count" aria-label="3 recorded">3</span>', overview)


def test_a_run_without_incidents_says_so(session_client, live_run):
    page = session_client(Role.VIEWER).get(f"/runs/{live_run.pk}/exceptions/").content.decode()
    assert "No failure and no restart recorded for this run." in page
    assert 'id="run-failure"' not in page


# ---- the live page's event-time figures -----------------------------------------------------

def test_a_keyed_operator_s_watermark_and_state_traffic_are_kept_served_and_sent_live(
        token_client, live_run):
    from webapp.runs.live import live_metrics
    from webapp.runs.selectors import run_snapshot

    metrics = _keyed_epoch(1, rows=[10, 10], busy=[5.0, 5.0], watermark_ms=NOW_MS)
    assert live_metrics(metrics, at=1.0)["wm"] == {"counts": [NOW_MS, 7000.0, 5000.0]}
    assert live_metrics(metrics, at=1.0)["st"] == {"counts": [12_345, 6_789]}
    _record(live_run, copy.deepcopy(metrics))
    api = token_client(Role.VIEWER).get(f"/api/runs/{live_run.pk}/metrics?since_epoch=0").json()
    counts = api["epochs"][0]["operators"]["counts"]
    assert (counts["watermark_ms"], counts["watermark_delay_ms"]) == (NOW_MS, 7000.0)
    assert (counts["state_bytes_read"], counts["state_bytes_written"]) == (12_345, 6_789)
    assert counts["rows_in"] == 20 and counts["etp"] == 1.0  # the contract's fields stay
    snapshot = run_snapshot(run_id=live_run.pk)["epochs"][0][1]
    assert snapshot["wm"] == {"counts": [NOW_MS, 7000.0, 5000.0]}
    assert snapshot["st"] == {"counts": [12_345, 6_789]}


def test_the_run_page_names_its_window_of_epochs_and_its_views(session_client, live_run):
    page = session_client(Role.VIEWER).get(f"/runs/{live_run.pk}/").content.decode()
    assert 'data-testid="smoothing-epochs" data-smoothing-epochs>30</b> epochs' in page
    assert '<tr data-watermark="counts">' in page and "window 10 seconds" in page
    assert '<td data-f="state-read">' in page and '<td data-f="state-written">' in page
    assert f'href="/runs/{live_run.pk}/operators/counts/instances/"' in page
    assert f'href="/runs/{live_run.pk}/epochs/"' in page


def _section(page: str, marker: str) -> str:
    return page.split(marker, 1)[1].split("</section>", 1)[0].split("</table>", 1)[0]


def _testid(page: str, name: str) -> str:
    return page.split(f'data-testid="{name}">', 1)[1].split("<", 1)[0]
