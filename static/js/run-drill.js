// The run page's operator drill-down: selecting an operator in the graph (its name, by click
// or keyboard) opens its own charts over time and its instances below the graph. While open,
// each epoch the page receives brings that operator's new epochs from the server.
import { TimeChart, formatBytes, formatMs, formatRate } from "./charts.js";
import { $ } from "./dom.js";
import { meanOf } from "./smoothing.js";

const percent = (v) => (v == null ? "—" : `${v.toFixed(0)} %`);

const PALETTE = ["--chart-a", "--chart-b", "--chart-c", "--chart-d"];

function chartsFor(s) {
  const keyed = s.watermark_lag.some((v) => v != null) || s.state_read.some((v) => v != null);
  const busy = s.busy.length ? s.busy : [[]];
  const charts = {
    rows: new TimeChart($("drill-rows"), [{ label: "in", stroke: "--chart-ingest" },
      { label: "out", stroke: "--chart-sinks" }], { height: 150, valueFormat: formatRate }),
    busy: new TimeChart($("drill-busy"), busy.map((_, i) => ({
      label: `#${i}`, stroke: PALETTE[i % PALETTE.length], dash: i >= PALETTE.length ? [4, 3] : undefined,
      agg: "max" })), { height: 150, valueFormat: percent }),
  };
  if (keyed) {
    charts.watermark = new TimeChart($("drill-watermark"), [{ label: "behind the clock", stroke: "--chart-p50" }],
      { height: 150, valueFormat: formatMs });
    charts.state = new TimeChart($("drill-state"), [{ label: "read", stroke: "--chart-a" },
      { label: "written", stroke: "--chart-c" }], { height: 150, valueFormat: formatBytes });
  }
  return charts;
}

// The operator's columns as each chart takes them.
function columnsOf(s) {
  return {
    rows: [s.in, s.out],
    busy: s.busy.length ? s.busy : [s.t.map(() => null)],
    watermark: [s.watermark_lag],
    state: [s.state_read, s.state_written],
  };
}

export function setupDrill(graph) {
  const section = $("operator-drill");
  const field = (name) => section.querySelector(`[data-drill="${name}"]`);
  let open = null; // {id, charts, series, last, loading}

  function showInstances(s) {
    const rows = s.busy.map((column, i) => {
      const tr = document.createElement("tr");
      const cells = [`#${i}`, percent(column[column.length - 1]), percent(meanOf(column))];
      cells.forEach((text, c) => {
        const cell = document.createElement(c === 0 ? "th" : "td");
        if (c === 0) cell.scope = "row";
        cell.textContent = text;
        tr.append(cell);
      });
      return tr;
    });
    section.querySelector(".drill-instances tbody").replaceChildren(...rows);
    const now = s.instances[s.instances.length - 1];
    const region = s.region ? ` Busy time is region ${s.region}'s: Spark runs it as one stage.` : "";
    field("note").textContent = s.epoch.length
      ? `${now} instance${now === 1 ? "" : "s"} now; the last ${s.epoch.length} epoch${s.epoch.length === 1 ? "" : "s"} (${s.epoch[0]}–${s.epoch[s.epoch.length - 1]}).${region}`
      : "No epoch recorded for this operator yet.";
  }

  function merge(s, more) {
    for (const name of ["epoch", "t", "instances", "in", "out", "watermark_lag", "state_read", "state_written"]) {
      s[name].push(...more[name]);
    }
    const width = Math.max(s.busy.length, more.busy.length);
    for (let i = 0; i < width; i++) {
      if (!s.busy[i]) s.busy[i] = new Array(s.t.length - more.t.length).fill(null);
      s.busy[i].push(...(more.busy[i] || more.t.map(() => null)));
    }
    s.region = more.region || s.region;
  }

  async function fetchSeries(id, since) {
    const url = section.dataset.series.replace("OPERATOR", encodeURIComponent(id)) + (since != null ? `?since_epoch=${since}` : "");
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(`${id}: ${response.status}`);
    return response.json();
  }

  function draw(s) {
    if (open.charts) Object.values(open.charts).forEach((c) => c.destroy());
    section.querySelectorAll('[data-drill="keyed"]').forEach((el) => { el.hidden = true; });
    open.charts = chartsFor(s);
    const columns = columnsOf(s);
    for (const [name, chart] of Object.entries(open.charts)) {
      chart.element.closest(".chart-block").hidden = false;
      chart.load(s.t, columns[name]);
    }
    showInstances(s);
  }

  async function select(id) {
    const op = graph.nodes[id];
    if (!op) return;
    Object.values(graph.nodes).forEach((el) => el.classList.toggle("selected", el === op));
    if (open && open.charts) Object.values(open.charts).forEach((c) => c.destroy());
    open = { id, charts: null, series: null, loading: true };
    // Nothing of the operator shown before stays: its charts and their point counts go.
    delete section.dataset.loaded;
    section.querySelectorAll('[data-drill="keyed"]').forEach((el) => { el.hidden = true; });
    section.querySelectorAll(".chart").forEach((el) => {
      el.replaceChildren();
      delete el.dataset.points;
      delete el.dataset.drawn;
    });
    const type = op.querySelector(".op-type").textContent;
    field("id").textContent = id;
    field("type").textContent = type;
    const link = field("instances-link");
    link.href = section.dataset.instances.replace("OPERATOR", encodeURIComponent(id));
    link.hidden = !["window_aggregate", "join", "dedupe"].includes(type);
    field("note").textContent = "Loading…";
    section.querySelector(".drill-instances tbody").replaceChildren();
    // The data preview asks for the operator shown; one of another operator goes.
    if (field("sample-operator")) {
      field("sample-operator").value = id;
      $("drill-sample").replaceChildren();
    }
    section.hidden = false;
    section.dataset.operator = id;
    $("drill-title").focus();
    try {
      const s = await fetchSeries(id);
      if (!open || open.id !== id) return;
      open.series = s;
      draw(s);
      section.dataset.loaded = id;
    } catch (error) {
      field("note").textContent = `The figures of ${id} could not be loaded (${error.message}); select it again to retry.`;
    } finally {
      if (open && open.id === id) open.loading = false;
    }
  }

  function close() {
    if (open && open.charts) Object.values(open.charts).forEach((c) => c.destroy());
    open = null;
    section.hidden = true;
    delete section.dataset.operator;
    Object.values(graph.nodes).forEach((el) => el.classList.remove("selected"));
  }

  // A new epoch: fetch what the open operator gained since its newest epoch shown.
  async function onEpoch() {
    if (!open || open.loading || !open.series) return;
    const { id, series } = open;
    open.loading = true;
    try {
      const more = await fetchSeries(id, series.epoch[series.epoch.length - 1] ?? null);
      if (!open || open.id !== id || !more.epoch.length) return;
      const widened = more.busy.length > series.busy.length;
      merge(series, more);
      if (widened) { draw(series); return; }  // an instance more: its own line from now on
      const columns = columnsOf(more);
      more.t.forEach((t, i) => {
        for (const [name, chart] of Object.entries(open.charts)) {
          chart.append(t, columns[name].map((c) => (c ? c[i] : null)));
        }
      });
      showInstances(series);
    } catch (error) {
      // The next epoch tries again; the charts keep what they have.
    } finally {
      if (open && open.id === id) open.loading = false;
    }
  }

  for (const [id, el] of Object.entries(graph.nodes)) {
    const name = el.querySelector(".op-id");
    name.setAttribute("role", "button");
    name.tabIndex = 0;
    name.setAttribute("aria-label", `Show ${id} over time`);
    name.setAttribute("aria-controls", "operator-drill");
    name.classList.add("drill-open");
    name.addEventListener("click", () => select(id));
    name.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); select(id); }
    });
  }
  $("drill-close").addEventListener("click", close);
  return { onEpoch, select };
}
