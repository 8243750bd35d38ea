"""What the pages look like and how they read: graph nodes show whole names in text that is
not shrunk out of reach, chart axes read in one unit and in UTC, the diff's line numbers are
narrow, exports keep the document's reading order, a required field is named as itself, and
the editor's refusal does not outlive the next action."""

from __future__ import annotations

import json
import re

import pytest

from tests.browser.conftest import api, screenshot
from tests.browser.fake_run import TEN_OPERATORS

pytestmark = pytest.mark.browser

# Ids as the editor names new operators: as long as their types, or longer.
EDITOR_NAMED = {
    "name": "editor-named", "key_groups": 16,
    "operators": [
        {"id": "generator", "type": "source.generator", "params": {"rows_per_second": 100}},
        {"id": "window_aggregate", "type": "window_aggregate",
         "params": {"key": ["campaign_id"], "time": "event_time", "window": "10 seconds",
                    "aggregates": {"views": "count(*)"}}},
        {"id": "memory", "type": "sink.memory", "params": {}},
    ],
    "edges": [{"from": "generator", "to": "window_aggregate"},
              {"from": "window_aggregate", "to": "memory"}],
}

RUN_OF = """
import json
from tests.browser.fake_run import fake_run_create
print("run", fake_run_create(dag=json.loads({document!r})).pk)
"""

# Per text of a node: cut on the side, cut at the bottom by its card, and its size as drawn
# (font size times the scale the graph is shown at).
NODE_TEXTS = """els => els.map((el) => {
  const box = el.getBoundingClientRect(), card = el.closest('.node').getBoundingClientRect();
  return {text: el.textContent, cutSide: el.scrollWidth > el.clientWidth,
          cutBottom: box.bottom > card.bottom + 0.5,
          drawnPx: parseFloat(getComputedStyle(el).fontSize) * box.width / el.offsetWidth};
})"""


def test_run_graph_nodes_show_whole_names(stack, signed_in):
    created = stack.shell(RUN_OF.format(document=json.dumps(EDITOR_NAMED)))
    run_id = created.split()[-1]
    page = signed_in("viewer")
    page.goto(f"/runs/{run_id}/")
    page.wait_for_selector("#run-graph .node")
    names = page.locator("#run-graph .op-id").evaluate_all(NODE_TEXTS)
    assert [n["text"] for n in names] == ["generator", "window_aggregate", "memory"]
    assert [n["text"] for n in names if n["cutSide"]] == []
    # A type that does not fit is cut, but its whole text is the element's title.
    types = page.locator("#run-graph .op-type").evaluate_all(
        "els => els.map((el) => el.title)")
    assert types == ["source.generator", "window_aggregate", "sink.memory"]


def test_job_graph_nodes_are_whole_and_readable(stack, signed_in):
    page = signed_in("editor")
    created = api(page, "POST", "/api/jobs", dict(TEN_OPERATORS, name="look-ten"))
    assert created["status"] == 201, created
    page.goto(f"/jobs/{created['body']['id']}/")
    texts = page.locator("[data-job-graph] .op-id, [data-job-graph] .op-type").evaluate_all(
        NODE_TEXTS)
    assert len(texts) == 20
    assert [t["text"] for t in texts if t["cutSide"] or t["cutBottom"]] == []
    assert min(t["drawnPx"] for t in texts) >= 10.5, texts
    screenshot(page, "job-graph", full_page=False)


CHART_TICKS = """async () => {
  const { TimeChart, formatMs } = await import('/static/js/charts.js');
  const el = document.createElement('div');
  el.style.width = '640px';
  document.querySelector('main').append(el);
  const chart = new TimeChart(el, [{label: 'p99', stroke: '#b91c1c', agg: 'max'}],
                              {valueFormat: formatMs});
  const t0 = Date.UTC(2026, 0, 5, 14, 30, 0) / 1000;
  chart.load([t0, t0 + 1, t0 + 2, t0 + 3, t0 + 4], [[9200, 9700, 10100, 10600, 10900]]);
  chart.setMarkers([{t: t0 + 1, label: 'rescale counts → 3'}, {t: t0 + 1.2, label: 'logic views'},
                    {t: t0 + 3, label: 'rescale uniq → 2'}]);
  await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
  const [x, y] = chart.plot.axes;
  return {x: x._values, y: y._values, xLabel: x.label, markers: chart.markerLabels,
          legend: chart.plot.series[0].value(chart.plot, t0)};
}"""


def test_chart_axes_read_in_one_unit_whole_seconds_and_utc(stack, signed_in):
    run_id = stack.shell(RUN_OF.format(document=json.dumps(
        dict(EDITOR_NAMED, name="look-chart")))).split()[-1]
    page = signed_in("viewer")
    page.goto(f"/runs/{run_id}/")
    page.wait_for_selector("#chart-latency .uplot")
    drawn = page.evaluate(CHART_TICKS)
    units = {label.rsplit(" ", 1)[-1] for label in drawn["y"] if label}
    assert units == {"s"}, drawn["y"]  # never "9500 ms" beside "10.0 s"
    assert drawn["x"] and all(re.fullmatch(r"14:30:0\d", t) for t in drawn["x"]), drawn["x"]
    assert drawn["xLabel"] == "time (UTC)"
    assert drawn["legend"] == "14:30:00 UTC"
    # Marker labels close in time go on separate rows instead of over each other.
    boxes = drawn["markers"]
    assert len(boxes) == 3
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            side_by_side = a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
            assert a["y"] != b["y"] or side_by_side, (a, b)


def test_diff_line_numbers_are_narrow(signed_in):
    page = signed_in("editor")
    created = api(page, "POST", "/api/jobs", dict(TEN_OPERATORS, name="look-diff"))
    assert created["status"] == 201, created
    page.goto(f"/jobs/{created['body']['id']}/diff/?a=1&b=1")
    widths = page.locator("table.diff tr:first-child td").evaluate_all(
        "tds => tds.map((td) => td.getBoundingClientRect().width)")
    assert widths[0] < 64 and widths[2] < 64, widths
    assert widths[1] > 400 and widths[3] > 400, widths


def test_required_fields_are_named_by_their_param(signed_in):
    page = signed_in("editor")
    page.goto("/jobs/new/")
    page.click('.palette-item[data-type="window_aggregate"]')
    time_field = page.get_by_role("textbox", name="time", exact=True)
    assert time_field.count() == 1
    assert time_field.get_attribute("required") is not None
    assert page.get_by_role("textbox", name="window", exact=True).count() == 1


def test_export_keeps_the_document_reading_order(signed_in):
    page = signed_in("editor")
    page.goto("/jobs/new/")
    page.click('.palette-item[data-type="source.generator"]')
    page.click('.palette-item[data-type="filter"]')
    page.fill("#op-parallelism", "2")  # set after its params: still read before them
    page.fill("#doc-name", "reading-order")
    with page.expect_download() as download:
        page.click("#export")
    exported = json.loads(open(download.value.path()).read())
    assert list(exported) == ["name", "key_groups", "operators", "edges"]
    assert list(exported["operators"][1]) == ["id", "type", "parallelism", "params"]
    assert [list(e) for e in exported["edges"]] == [["from", "to"]]


def test_a_refused_edge_message_goes_with_the_next_action(signed_in):
    page = signed_in("editor")
    page.goto("/jobs/new/")
    page.click('.palette-item[data-type="source.generator"]')
    page.click('.palette-item[data-type="filter"]')
    page.click('[data-operator="filter"] button.connect')
    page.click('[data-operator="generator"] .op-select')
    message = page.wait_for_selector("#edge-message:not([hidden])")
    assert "rejected" in message.inner_text()
    page.click('.palette-item[data-type="sink.memory"]')
    assert page.is_hidden("#edge-message")


RECOVERING_RUN_OF = """
import json
from tests.browser.fake_run import fake_run_create
from webapp.runs.services import run_status_set
run = fake_run_create(dag=json.loads({document!r}))
# A cause as long as Spark's own, which narrows the outcome column.
run_status_set(run_id=run.pk, status="recovering",
               detail="driver 4242 exited with code 1: the query failed: pyspark.errors."
                      "exceptions.captured.ArithmeticException: [DIVIDE_BY_ZERO] Division by "
                      "zero. Use `try_divide` to tolerate divisor being 0 and return NULL instead."
                      " SQLSTATE: 22012; restarting from the checkpoint")
print("run", run.pk)
"""


def test_history_outcomes_read_on_one_line(stack, signed_in):
    created = stack.shell(RECOVERING_RUN_OF.format(
        document=json.dumps(dict(EDITOR_NAMED, name="look-recovering"))))
    assert created.split()[-1].isdigit(), created
    page = signed_in("viewer", width=1024)
    page.goto("/history/")
    page.wait_for_selector("td .status")
    # An inline badge that wraps is drawn as two boxes.
    badges = page.locator("td .status").evaluate_all(
        "els => els.map((el) => [el.textContent, el.getClientRects().length])")
    assert ["recovering", 1] in badges, badges
    assert [b for b in badges if b[1] != 1] == [], badges
