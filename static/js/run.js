// The run page: subscribe to the run's websocket first, take its snapshot, load the charts'
// history once, then apply each epoch as it arrives. No polling and no reloads. Scaling
// controls fill the server-rendered dialog, whose preview and submit are htmx requests.
/* global htmx */
import { drawGraph } from "./graph.js";
import { MAX_POINTS, TimeChart, formatBytes, formatMs, formatRate } from "./charts.js";
import { $, esc } from "./dom.js";
import { openLiveSocket } from "./live-socket.js";
import { setupScaling } from "./run-scale.js";
import { setupBroker } from "./run-broker.js";
import { setupChanges } from "./run-changes.js";
import { setupFlow } from "./run-flow.js";
import { showCatchUp } from "./run-catch-up.js";
import { setupDrill } from "./run-drill.js";
import { EpochWindow, maxOf, meanOf, rolling } from "./smoothing.js";

const config = JSON.parse(document.getElementById("run-config").textContent);
const LIVE = new Set(["starting", "running", "recovering"]);
// A stopping run still sends its last epoch and its end: only these send nothing more.
const ENDED = new Set(["stopped", "failed"]);
// Ranks far enough apart for the rows/s label on each edge (run-flow.js).
const NODE = { width: 184, height: 118, ranksep: 62, nodesep: 16 };
// Nothing is measured before a run's first epoch: no change is offered on guesses.
const NO_EPOCH_YET = "the run has not finished an epoch yet";

const state = {
  status: config.status,
  fields: [],            // live_fields of the snapshot: the order of each operator's values
  lastEpoch: null,       // the newest epoch applied
  instances: Object.fromEntries(config.dag.operators.map(
    (o) => [o.id, config.parallelism?.[o.id] ?? o.parallelism ?? 1])),
  pendingOps: new Set(),
  reconfigurations: new Map(), // id -> {t, label}
  epochTimes: new Map(), // epoch -> unix seconds, for markers
  historyLoaded: false,
  buffered: [],
  // The figures are shown over the last N epochs (see smoothing.js); the raw per-epoch
  // columns are kept so the charts can be redrawn when N changes.
  window: new EpochWindow(config.smoothing_epochs, Math.max(...config.smoothing_choices)),
  raw: { t: [], in: [], out: [], p50: [], p99: [] },
  lastMetrics: null,
  snapshot: false,       // whether the server's snapshot has been shown
};

// ---- graph -------------------------------------------------------------------------------

function metricCell(label, field, title) {
  return `<div class="m" title="${title}"><span>${label}</span><b data-f="${field}">—</b></div>`;
}

// What each figure of a node is, said the same way wherever it is shown (ETP: 0 to 1).
const ETP_TITLE = "ETP, effective throughput: the share of the sinks' output (0 to 1) that this operator's rows reach without passing a congested operator";
const METRIC_TITLES = {
  in: "Rows per second coming in (mean over the window)",
  out: "Rows per second going out (mean over the window)",
  busy: "Share of the epoch the operator's instances were busy",
  true: "True rate: rows per second the instances process while busy (their capacity)",
};

function renderOperator(raw, el) {
  const op = { id: esc(raw.id), type: esc(raw.type) };
  const limits = config.limits[raw.id] || {};
  el.classList.add("run-node");
  el.setAttribute("role", "group");
  el.setAttribute("aria-label", `operator ${raw.id} (${raw.type})`);
  el.innerHTML = `
    <div class="node-head"><span class="op-id">${op.id}</span><span class="op-type">${op.type}</span></div>
    <div class="node-metrics">
      ${metricCell("in/s", "in", METRIC_TITLES.in)}${metricCell("out/s", "out", METRIC_TITLES.out)}
      ${metricCell("busy", "busy", METRIC_TITLES.busy)}${metricCell("true/s", "true", METRIC_TITLES.true)}
    </div>
    <div class="node-foot">
      <div class="etp" title="${ETP_TITLE}"><span class="etp-bar"><i></i></span><span>ETP <b data-f="etp">—</b></span></div>
      <div class="scale" role="group" aria-label="Instances of ${op.id}">
        ${config.can_operate ? `<button type="button" class="step minus" data-step="-1" aria-label="Remove one instance of ${op.id}">−</button>` : ""}
        <b class="instances" data-f="instances" aria-live="polite" title="instances">${state.instances[raw.id]}</b>
        ${config.can_operate ? `<button type="button" class="step plus" data-step="1" aria-label="Add one instance of ${op.id}">+</button>` : ""}
      </div>
    </div>
    <div class="node-note" data-f="note">${limits.pinned_reason ? `pinned to 1: ${esc(limits.pinned_reason)}` : ""}</div>`;
  el.querySelectorAll("button.step").forEach((b) => b.addEventListener("click", () => {
    if (b.getAttribute("aria-disabled") === "true") return;
    scaling.openRescale(raw.id, state.instances[raw.id] + Number(b.dataset.step));
  }));
}

const broker = setupBroker($("broker-sources"), config.broker);
const graph = drawGraph($("run-graph"), config.dag, { size: NODE, renderNode: renderOperator });
const flow = setupFlow(graph);
const drill = setupDrill(graph);
window.addEventListener("resize", () => graph.fit());

// Whether a step is offered, and if not, why (the planner's pin, the key-group limit, the run).
function stepBlock(opId, step) {
  const limits = config.limits[opId] || {};
  const n = state.instances[opId];
  if (!LIVE.has(state.status)) return `the run is ${state.status}`;
  if (limits.pinned_reason) return `pinned to 1 instance: ${limits.pinned_reason}`;
  if (limits.fixed_reason) return `${opId} ${limits.fixed_reason}`;
  if (step > 0 && limits.max != null && n >= limits.max) return `at its limit of ${limits.max} instances`;
  if (step < 0 && n <= 1) return "already at 1 instance";
  if (state.lastEpoch === null) return NO_EPOCH_YET;
  if (state.pendingOps.has(opId)) return "a change to this operator is still pending";
  return null;
}

function refreshSteps() {
  for (const [opId, el] of Object.entries(graph.nodes)) {
    el.querySelectorAll("button.step").forEach((b) => {
      const blocked = stepBlock(opId, Number(b.dataset.step));
      b.setAttribute("aria-disabled", blocked ? "true" : "false");
      b.title = blocked || b.getAttribute("aria-label");
    });
    el.classList.toggle("pending", state.pendingOps.has(opId));
  }
}

function setText(el, field, text) {
  const target = el.querySelector(`[data-f="${field}"]`);
  if (target && target.textContent !== text) target.textContent = text;
}

// The mean of one operator's field over the epochs the figures are shown over.
function opMean(recent, opId, name) {
  const i = state.fields.indexOf(name);
  return meanOf(recent.map((m) => (m.ops[opId] ? m.ops[opId][i] : null)));
}

function applyOperators(ops, batchMs, bottleneck = null, recent = [], wm = {}) {
  const f = state.fields;
  const at = (values, name) => values[f.indexOf(name)];
  let total = 0;
  for (const [opId, values] of Object.entries(ops)) {
    const el = graph.nodes[opId];
    if (!el) continue;
    const instances = at(values, "instances");
    if (instances != null) state.instances[opId] = instances;
    total += state.instances[opId];
    const busy = at(values, "busy");
    const etp = opMean(recent, opId, "etp");
    const congested = Boolean(at(values, "congested"));
    const region = at(values, "region");
    const mark = region ? " ᴿ" : "";
    setText(el, "in", formatRate(opMean(recent, opId, "input_rate")));
    setText(el, "out", formatRate(opMean(recent, opId, "output_rate")));
    setText(el, "busy", busy == null || !batchMs ? "—" : `${Math.min(100, (100 * busy) / batchMs).toFixed(0)}%${mark}`);
    setText(el, "true", `${formatRate(at(values, "processing_rate"))}${mark}`);
    const limits = config.limits[opId] || {};
    const notes = [];
    if (region) notes.push(`ᴿ busy and true/s of region ${region} (one Spark stage)`);
    if (limits.pinned_reason) notes.push(`pinned to 1: ${limits.pinned_reason}`);
    if (limits.fixed_reason) notes.push(`instances fixed: ${limits.fixed_reason}`);
    const demand = at(values, "demand_rate");
    if (congested && demand != null) notes.unshift(`demand ${formatRate(demand)}/s over capacity`);
    if (wm[opId]) notes.push(`watermark ${formatMs(wm[opId][1])} behind the clock`);
    setText(el, "note", notes.join(" · "));
    // A note cut by the card is whole in its title.
    el.querySelector('[data-f="note"]').title = notes.join("\n");
    el.classList.toggle("bottleneck", bottleneck != null && (bottleneck === opId || bottleneck === region));
    setText(el, "etp", etp == null ? "—" : etp.toFixed(2));
    el.dataset.etp = etp == null ? "" : etp.toFixed(3);
    setText(el, "instances", String(state.instances[opId]));
    el.classList.toggle("congested", congested);
    el.style.setProperty("--etp", etp == null ? 0 : etp);
    el.querySelector(".etp-bar i").style.width = `${Math.round((etp || 0) * 100)}%`;
  }
  $("kpi-instances").textContent = String(total);
  refreshSteps();
}

// ---- figures and charts ------------------------------------------------------------------

const throughput = new TimeChart($("chart-throughput"), [
  { label: "ingest", stroke: "--chart-ingest" }, { label: "to sinks", stroke: "--chart-sinks" },
], { valueFormat: formatRate });
const latency = new TimeChart($("chart-latency"), [
  { label: "p50", stroke: "--chart-p50" }, { label: "p99", stroke: "--chart-p99", agg: "max" },
], { valueFormat: formatMs });

function sumOver(ops, ids, name) {
  let sum = null;
  for (const id of ids) {
    const v = ops[id] ? ops[id][state.fields.indexOf(name)] : null;
    if (v != null) sum = (sum || 0) + v;
  }
  return sum;
}

// The run-wide figures over the epochs in the window: rates and p50 as means, p99 the highest.
function windowFigures(recent) {
  return {
    ingest: meanOf(recent.map((m) => sumOver(m.ops, config.sources, "output_rate"))),
    egress: meanOf(recent.map((m) => sumOver(m.ops, config.sinks, "input_rate"))),
    p50: meanOf(recent.map((m) => m.lat[0])),
    p99: maxOf(recent.map((m) => m.lat[1])),
  };
}

function utcTime(ms) {
  return `${new Date(ms).toISOString().slice(11, 19)} UTC`;
}

// Each keyed operator's watermark and how far it is behind the clock and the newest event.
function applyWatermarks(wm) {
  for (const opId of config.keyed) {
    const row = document.querySelector(`[data-watermark="${CSS.escape(opId)}"]`);
    if (!row) continue;
    const v = wm[opId];
    const cell = (field, text) => { row.querySelector(`[data-f="${field}"]`).textContent = text; };
    cell("watermark", v ? utcTime(v[0]) : "none yet (no rows)");
    cell("delay", v ? formatMs(v[1]) : "—");
    cell("lag", v ? formatMs(v[2]) : "—");
  }
}

// Each keyed operator's state traffic in the last epoch: bytes read from the store, written.
function applyStateTraffic(st) {
  for (const opId of config.keyed) {
    const row = document.querySelector(`[data-watermark="${CSS.escape(opId)}"]`);
    if (!row) continue;
    const v = st[opId];
    row.querySelector('[data-f="state-read"]').textContent = v ? formatBytes(v[0]) : "—";
    row.querySelector('[data-f="state-written"]').textContent = v ? formatBytes(v[1]) : "—";
  }
}

function rememberRaw(m) {
  const raw = state.raw;
  if (raw.t.length && m.t <= raw.t[raw.t.length - 1]) return false;
  raw.t.push(m.t);
  raw.in.push(sumOver(m.ops, config.sources, "output_rate"));
  raw.out.push(sumOver(m.ops, config.sinks, "input_rate"));
  raw.p50.push(m.lat[0]);
  raw.p99.push(m.lat[1]);
  if (raw.t.length > MAX_POINTS) Object.values(raw).forEach((c) => c.splice(0, c.length - MAX_POINTS));
  return true;
}

// The charts' newest point: the window's figures over the raw columns' last N epochs.
function appendCharts(m) {
  if (!rememberRaw(m)) return;
  showChartsEmpty(false);
  const n = state.window.size;
  const last = (column) => column.slice(-n);
  throughput.append(m.t, [meanOf(last(state.raw.in)), meanOf(last(state.raw.out))]);
  latency.append(m.t, [meanOf(last(state.raw.p50)), maxOf(last(state.raw.p99))]);
}

function drawCharts() {
  const { t, in: ingest, out, p50, p99 } = state.raw;
  const n = state.window.size;
  throughput.load(t, [rolling(ingest, n), rolling(out, n)]);
  latency.load(t, [rolling(p50, n), rolling(p99, n, maxOf)]);
}

function applyEpoch(epoch, m, chart = true) {
  if (state.lastEpoch !== null && epoch <= state.lastEpoch) return;
  const first = state.lastEpoch === null;
  state.lastEpoch = epoch;
  if (first) {
    showProgress();
    scaling.refreshPolicy();
  }
  state.epochTimes.set(epoch, m.t);
  state.window.add(epoch, m);
  state.lastMetrics = m;
  $("kpi-epoch").textContent = String(epoch);
  applyFigures(m);
  broker.apply(m.broker);
  if (chart) appendCharts(m);
}

function applyFigures(m) {
  const recent = state.window.recent();
  const { ingest, egress, p50, p99 } = windowFigures(recent);
  document.querySelectorAll("[data-smoothing-epochs]").forEach((el) => { el.textContent = String(state.window.size); });
  $("smoothing").dataset.over = String(state.window.count);
  $("kpi-batch").textContent = formatMs(m.d);
  const trend = m.growth == null ? "" : m.growth > 0 ? `↑${formatRate(m.growth)}/s` : m.growth < 0 ? `↓${formatRate(-m.growth)}/s` : "steady";
  const backlog = $("kpi-backlog");
  backlog.textContent = formatRate(m.backlog);
  if (trend) {
    // The trend on a line of its own: beside the figure it was cut off in a narrow column.
    const line = document.createElement("small");
    line.className = "trend";
    line.textContent = trend;
    backlog.append(line);
  }
  backlog.classList.toggle("bad", (m.growth || 0) > 0);
  $("kpi-offered").textContent = m.offered == null ? "—" : `${formatRate(m.offered)}/s`;
  $("kpi-in").textContent = `${formatRate(ingest)}/s`;
  $("kpi-out").textContent = `${formatRate(egress)}/s`;
  $("kpi-p50").textContent = formatMs(p50);
  $("kpi-p99").textContent = formatMs(p99);
  applyOperators(m.ops, m.d, m.bottleneck, recent, m.wm || {});
  flow.apply(m, recent, state.fields);
  showCatchUp($("kpi-catch-up"), m, recent);
  applyWatermarks(m.wm || {});
  applyStateTraffic(m.st || {});
}

function setMarkers() {
  const markers = [...state.reconfigurations.values()].filter((m) => m.t != null);
  throughput.setMarkers(markers);
  latency.setMarkers(markers);
}

// Only changes that took effect, or may still, are marked: a refused one changed nothing.
const UNDONE = new Set(["rejected", "failed"]);

function noteReconfiguration(r) {
  if (UNDONE.has(r.status)) { state.reconfigurations.delete(r.id); return; }
  const t = r.applied_at ? Date.parse(r.applied_at) / 1000 : Date.parse(r.requested_at) / 1000;
  state.reconfigurations.set(r.id, { t, label: `#${r.id} ${r.kind}` });
}

async function loadHistory() {
  try {
    const response = await fetch(config.series, { headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(`history: ${response.status}`);
    const s = await response.json();
    s.epoch.forEach((e, i) => state.epochTimes.set(e, s.t[i]));
    state.raw = { t: s.t, in: s.in, out: s.out, p50: s.p50, p99: s.p99 };
  } catch (error) {
    // Said beside the charts: the label next to the title is the connection's state, which
    // a failed fetch (the network gone while it ran) must not overwrite.
    const note = $("history-state");
    note.textContent = "Earlier epochs could not be loaded; the charts start at the epochs this page received.";
    note.hidden = false;
  }
  state.historyLoaded = true;
  for (const [epoch, m] of state.buffered) {
    rememberRaw(m);
    state.epochTimes.set(epoch, m.t);
  }
  state.buffered = [];
  drawCharts();
  setMarkers();
  showChartsEmpty(state.raw.t.length === 0);
}

// A chart with no epoch to draw says so, instead of an empty box.
function showChartsEmpty(empty) {
  document.querySelectorAll(".chart-empty").forEach((note) => { note.hidden = !empty; });
}

// Before the first epoch the figures are dashes: a line says what the run is doing and for
// how long, until an epoch comes.
let progressTimer = null;
function showProgress() {
  const line = $("run-progress");
  clearInterval(progressTimer);
  // Said once the snapshot has shown what the server has: until then it is not known.
  const waiting = state.snapshot && state.lastEpoch === null && LIVE.has(state.status);
  line.hidden = !waiting;
  if (!waiting) return;
  const since = Date.parse(config.status_since);
  const doing = {
    starting: "Starting: the driver and Spark are starting; figures come with the first epoch",
    recovering: "Recovering: restarting from the checkpoint, no epoch finished yet",
  }[state.status] || "Running: no epoch has finished yet; figures come with the first";
  const tick = () => {
    const seconds = Math.max(0, Math.round((Date.now() - since) / 1000));
    line.textContent = `${doing} (${seconds} s so far).`;
  };
  tick();
  progressTimer = setInterval(tick, 1000);
}

// ---- status ------------------------------------------------------------------------------

function setStatus(status) {
  if (!status || status === state.status) return;
  state.status = status;
  const badge = $("run-status");
  badge.textContent = status;
  badge.className = `status status-${status}`;
  refreshSteps();
  showProgress();
  if (!LIVE.has(status)) {
    if (ENDED.has(status)) endLive();
    // An ending run offers no control the server would refuse: hide them now, and let the
    // panels re-render without theirs (rollback, autoscaler, recommendations).
    document.querySelectorAll("[data-live-only]").forEach((el) => { el.hidden = true; });
    document.querySelectorAll("dialog[open]").forEach((d) => d.close());
    htmx.trigger(document.body, "autoscale-changed");
    htmx.trigger(document.body, "reconfigurations-changed");
  }
  if (status === "failed" || status === "recovering") htmx.trigger(document.body, "incidents-changed");
}

function readPending() {
  state.pendingOps = new Set();
  document.querySelectorAll("#reconfigurations li[data-status]").forEach((li) => {
    if (li.dataset.status === "requested" || li.dataset.status === "pending") {
      (li.dataset.operators || "").split(",").filter(Boolean).forEach((op) => state.pendingOps.add(op));
    }
  });
  refreshSteps();
}

// ---- websocket ---------------------------------------------------------------------------

let socket = null;
function connect() {
  socket = openLiveSocket({ path: config.ws, onMessage, label: $("live-state") });
}

// An ended run sends nothing more: its page says so instead of "live".
function endLive() {
  if (socket) socket.close();
  const label = $("live-state");
  label.textContent = `not live: the run is ${state.status}`;
  label.className = "live-state ended";
  label.dataset.state = "ended";
}

function onMessage(event) {
  if (event.type === "snapshot") {
    state.fields = event.live_fields;
    document.body.dataset.snapshot = "taken";  // the page shows what the server has
    state.snapshot = true;
    setStatus(event.run.status);
    event.reconfigurations.forEach(noteReconfiguration);
    const epochs = event.epochs;  // [epoch, metrics] pairs in the live form
    if (!state.historyLoaded) {
      // The snapshot's epochs fill the window the figures are shown over; the newest shows.
      epochs.slice(0, -1).forEach(([epoch, m]) => state.window.add(epoch, m));
      const last = epochs[epochs.length - 1];
      if (last) applyLive(last[0], last[1]);
      loadHistory();
    } else {
      epochs.forEach(([epoch, m]) => applyEpoch(epoch, m));
    }
    setMarkers();
    showProgress();
    if (ENDED.has(state.status)) endLive();
  } else if (event.type === "run.epoch") {
    broker.count(event.metrics.broker);  // a new epoch: its dead letters join the run's total
    applyLive(event.epoch, event.metrics);
    drill.onEpoch();
  } else if (event.type === "run.autoscale") {
    htmx.trigger(document.body, "autoscale-changed");  // a new proposal: refresh the panel
  } else if (event.type === "run.status") {
    setStatus(event.status);
  } else if (event.type === "reconfiguration.status") {
    const known = state.reconfigurations.get(event.reconfiguration);
    const t = event.epoch != null ? state.epochTimes.get(event.epoch) : null;
    if (UNDONE.has(event.status)) state.reconfigurations.delete(event.reconfiguration);
    else state.reconfigurations.set(event.reconfiguration, {
      t: t ?? (known ? known.t : Date.now() / 1000),
      label: known ? known.label : `#${event.reconfiguration}`,
    });
    setMarkers();
    htmx.trigger(document.body, "reconfigurations-changed");
    document.body.dispatchEvent(new CustomEvent("reconfiguration-status", {
      detail: { id: event.reconfiguration, status: event.status },
    }));
  }
}

// Before the history has loaded, epochs update the figures and wait to join the charts.
function applyLive(epoch, m) {
  if (state.historyLoaded) { applyEpoch(epoch, m); return; }
  if (state.lastEpoch !== null && epoch <= state.lastEpoch) return;
  applyEpoch(epoch, m, false);
  state.buffered.push([epoch, m]);
}

const scaling = setupScaling({ state, refreshSteps, setStatus });
setupChanges();

$("smoothing-epochs").addEventListener("change", (event) => {
  state.window.size = Number(event.target.value);
  if (state.lastMetrics) applyFigures(state.lastMetrics);
  if (state.historyLoaded) drawCharts();
});

document.body.addEventListener("htmx:afterSettle", (event) => {
  if (event.detail.target && event.detail.target.id === "reconfigurations-slot") readPending();
});

readPending();
connect();
