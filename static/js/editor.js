// The job editor: the document is the state; every change redraws what it touches and is
// validated by the server (debounced), whose problems are shown on the operators and edges they
// name. Saving goes through the JSON API with the base version, so a concurrent save is shown
// as a conflict and never overwritten.
import { drawGraph } from "./graph.js";
import { $, csrfToken, esc, nodeButton } from "./dom.js";
import { createInspector } from "./editor-inspector.js";
import { setupDocumentIO } from "./editor-io.js";
import { READABLE_SCALE, canvasMaxHeight, createCanvasView } from "./editor-canvas.js";

const config = JSON.parse(document.getElementById("editor-config").textContent);
const catalog = new Map(config.catalog.map((t) => [t.type, t]));
const NODE = { width: 168, height: 68, ranksep: 36, nodesep: 18 };
const csrf = csrfToken();

const state = {
  doc: structuredClone(config.document),
  selected: null,       // {operator: id} or {edge: "from->to"}
  connectFrom: null,
  problems: [],
  columns: {},
  validation: 0,
  timer: null,
  saving: false,
  newer: null,          // a version someone else saved meanwhile
  past: [],             // documents before each change, for undo (newest last)
  future: [],           // documents undone, for redo
  last: null,           // the document as of the latest change
};
const HISTORY_LIMIT = 200;
const NO_OPERATORS = "the job has no operators: add a source, the operators and a sink";
state.doc.operators ??= [];
state.doc.edges ??= [];

const opById = (id) => state.doc.operators.find((o) => o.id === id);
const edgeKey = (e) => `${e.from}->${e.to}`;

// ---- problems ----------------------------------------------------------------------------

function problemTarget(where) {
  let m = /^operator '([^']+)'/.exec(where);
  if (m) return { operator: m[1] };
  m = /^edge (\S+) -> (\S+)/.exec(where);
  if (m) return { edge: `${m[1]}->${m[2]}` };
  return {};
}

function problemsOf(target) {
  return state.problems.filter((p) => {
    const t = problemTarget(p.where);
    return (target.operator && t.operator === target.operator) || (target.edge && t.edge === target.edge);
  });
}

async function check(doc) {
  const response = await fetch("/api/validate", {
    method: "POST", headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
    body: JSON.stringify(doc),
  });
  const body = await response.json();
  if (!response.ok) return { valid: false, problems: body.problems || [{ where: "document", message: body.error }] };
  return body;
}

function scheduleValidation() {
  clearTimeout(state.timer);
  $("validity").textContent = "checking…";
  $("validity").className = "validity";
  state.timer = setTimeout(validate, 250);
}

async function validate() {
  const seq = ++state.validation;
  let result;
  try {
    result = await check(state.doc);
  } catch (error) {
    $("validity").textContent = "could not check (offline?)";
    return;
  }
  if (seq !== state.validation) return; // a newer change is being checked
  state.problems = result.problems || [];
  state.columns = result.columns || {};
  showProblems();
}

function showProblems() {
  const count = state.problems.length;
  $("validity").textContent = count === 0 ? "valid" : `${count} problem${count === 1 ? "" : "s"}`;
  $("validity").className = `validity ${count === 0 ? "valid" : "invalid"}`;
  const list = $("problems");
  list.replaceChildren();
  for (const p of state.problems) {
    const li = document.createElement("li");
    const target = problemTarget(p.where);
    if (target.operator && opById(target.operator)) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "link-button";
      b.textContent = target.operator;
      b.addEventListener("click", () => select({ operator: target.operator }));
      li.append(b, document.createTextNode(` ${p.message}`));
    } else {
      li.textContent = `${p.where}: ${p.message}`;
    }
    list.append(li);
  }
  if (count === 0) list.innerHTML = '<li class="muted">None.</li>';
  for (const [id, el] of Object.entries(graph.nodes || {})) {
    const mine = problemsOf({ operator: id });
    el.classList.toggle("has-problems", mine.length > 0);
    const badge = el.querySelector(".problem-badge");
    badge.hidden = mine.length === 0;
    badge.textContent = String(mine.length);
    badge.title = mine.map((p) => p.message).join("\n");
    el.querySelector(".node-problem").textContent = mine.length ? mine[0].message : "";
  }
  document.querySelectorAll("#editor-graph path.edge").forEach((path) => {
    path.classList.toggle("bad", problemsOf({ edge: path.dataset.edge }).length > 0);
  });
  inspector.renderProblems();
  $("save").disabled = count > 0 || state.saving;
  $("save").title = count > 0 ? "Fix the problems first" : "";
}

// ---- canvas ------------------------------------------------------------------------------

let graph = { nodes: {} };

function renderNode(op, el) {
  const type = catalog.get(op.type);
  el.classList.add("editor-node", `role-${type ? type.role : "unknown"}`);
  el.setAttribute("role", "group");
  el.setAttribute("aria-label", `operator ${op.id}, ${op.type}`);
  const head = document.createElement("div");
  head.className = "node-head";
  const name = nodeButton(op.id, `Select ${op.id}`, () => nodeActivated(op.id), "op-select");
  const badge = document.createElement("span");
  badge.className = "problem-badge";
  badge.hidden = true;
  head.append(name, badge);
  const meta = document.createElement("div");
  meta.className = "node-meta";
  meta.innerHTML = `<span class="op-type">${esc(op.type)}</span>${(op.parallelism || 1) > 1 ? `<span class="par">×${op.parallelism}</span>` : ""}`;
  const actions = document.createElement("div");
  actions.className = "node-actions";
  if (!type || type.role !== "sink") {
    actions.append(nodeButton("→", `Connect ${op.id} to another operator`, () => startConnect(op.id), "small-button connect"));
  }
  actions.append(nodeButton("×", `Delete ${op.id}`, () => deleteOperator(op.id), "small-button delete"));
  meta.append(actions);
  const problem = document.createElement("div");
  problem.className = "node-problem";
  el.append(head, meta, problem);
  if (!type || type.role !== "sink") el.append(outputPort(op.id));
  el.addEventListener("click", () => nodeActivated(op.id));
  el.classList.toggle("selected", state.selected?.operator === op.id);
  el.classList.toggle("connect-source", state.connectFrom === op.id);
}

// The handle to drag an edge from (a click on it starts connecting, as the → button does).
function outputPort(id) {
  const port = document.createElement("span");
  port.className = "port";
  port.title = `Drag to the operator ${id} feeds`;
  port.setAttribute("aria-hidden", "true");
  port.addEventListener("pointerdown", (event) => {
    if (event.button !== 0) return;
    clearEdgeMessage();
    canvas.startDrag(id, event);
  });
  port.addEventListener("click", (event) => {
    event.stopPropagation();
    if (!canvas.clickedAfterDrag()) startConnect(id);
  });
  return port;
}

function render() {
  $("empty-canvas").hidden = state.doc.operators.length > 0;
  graph = drawGraph($("editor-graph"), state.doc, {
    size: NODE, renderNode, minScale: READABLE_SCALE, orient: "auto", scaleToFit: false,
    maxHeight: canvasMaxHeight(),
    edgeClass: (e) => (state.selected?.edge === edgeKey(e) ? "selected" : ""),
    onEdgeClick: (e) => select({ edge: edgeKey(e) }),
  });
  canvas.attach(graph);
  $("doc-name").value = state.doc.name || "";
  $("doc-key-groups").value = state.doc.key_groups ?? 128;
  inspector.render();
  showProblems();
}

// A refused edge's message answers the attempt; the next action makes it old news.
function clearEdgeMessage() {
  $("edge-message").hidden = true;
}

function changed({ redraw = true } = {}) {
  clearEdgeMessage();
  // A refused save's answer was about the document as it was: the badge and the list of
  // problems speak for the document from now on.
  if ($("save-status").dataset.refused) {
    $("save-status").textContent = "";
    delete $("save-status").dataset.refused;
  }
  remember();
  if (redraw) render();
  scheduleValidation();
}

// ---- undo and redo -----------------------------------------------------------------------

function remember() {
  const now = JSON.stringify(state.doc);
  if (now === state.last) return;
  if (state.last !== null) {
    state.past.push(state.last);
    if (state.past.length > HISTORY_LIMIT) state.past.shift();
  }
  state.future = [];
  state.last = now;
  updateHistoryButtons();
}

function travel(from, to) {
  if (!from.length) return;
  to.push(state.last);
  state.last = from.pop();
  state.doc = JSON.parse(state.last);
  if (state.selected?.operator && !opById(state.selected.operator)) state.selected = null;
  if (state.selected?.edge && !state.doc.edges.some((e) => edgeKey(e) === state.selected.edge)) state.selected = null;
  render();
  scheduleValidation();
  updateHistoryButtons();
}

const undo = () => travel(state.past, state.future);
const redo = () => travel(state.future, state.past);

function updateHistoryButtons() {
  $("undo").disabled = state.past.length === 0;
  $("redo").disabled = state.future.length === 0;
}

function select(target) {
  clearEdgeMessage();
  state.selected = target;
  render();
}

function nodeActivated(id) {
  if (state.connectFrom && state.connectFrom !== id) {
    connect(state.connectFrom, id);
    return;
  }
  state.connectFrom = null;
  $("connect-hint").textContent = "";
  select({ operator: id });
  graph.nodes[id]?.querySelector(".op-select")?.focus();
}

function startConnect(id) {
  clearEdgeMessage();
  state.connectFrom = id;
  $("connect-hint").textContent = `Connecting from ${id}: choose the operator it feeds (Esc cancels).`;
  render();
}

const typing = (el) => el && (el.isContentEditable || ["INPUT", "SELECT", "TEXTAREA"].includes(el.tagName));

function cancelConnecting() {
  if (canvas.cancelDrag()) return true;
  if (!state.connectFrom) return false;
  state.connectFrom = null;
  $("connect-hint").textContent = "";
  render();
  return true;
}

// Keys that act on the canvas; none of them while a field has the focus.
const CANVAS_KEYS = {
  "+": () => canvas.zoomIn(), "=": () => canvas.zoomIn(), "-": () => canvas.zoomOut(),
  "0": () => canvas.fit(), "?": () => $("shortcuts").showModal(),
  ArrowLeft: () => canvas.panBy(40, 0), ArrowRight: () => canvas.panBy(-40, 0),
  ArrowUp: () => canvas.panBy(0, 40), ArrowDown: () => canvas.panBy(0, -40),
};

document.addEventListener("keydown", (event) => {
  if ($("shortcuts").open) return; // the dialog closes itself on Esc
  if (event.key === "Escape") {
    if (!cancelConnecting() && state.selected && !typing(document.activeElement)) select(null);
    return;
  }
  const mod = event.ctrlKey || event.metaKey;
  const key = event.key.toLowerCase();
  if (mod && key === "s") {
    event.preventDefault();
    if (!$("save").disabled) $("save").click();
    return;
  }
  if (typing(document.activeElement)) return;
  if (mod && key === "z") {
    event.preventDefault();
    (event.shiftKey ? redo : undo)();
  } else if (mod && key === "y") {
    event.preventDefault();
    redo();
  } else if ((event.key === "Delete" || event.key === "Backspace") && state.selected) {
    event.preventDefault();
    if (state.selected.operator) deleteOperator(state.selected.operator);
    else removeEdge(state.selected.edge);
  } else if (!mod && !event.altKey && CANVAS_KEYS[event.key]) {
    event.preventDefault();
    CANVAS_KEYS[event.key]();
  }
});

// Whether `to` already reaches `from`, so that an edge from -> to would close a cycle.
function reaches(start, goal) {
  const seen = new Set([start]);
  const queue = [start];
  while (queue.length) {
    const id = queue.shift();
    if (id === goal) return true;
    for (const e of state.doc.edges) {
      if (e.from === id && !seen.has(e.to)) { seen.add(e.to); queue.push(e.to); }
    }
  }
  return false;
}

// Why the editor refuses an edge before asking the server, or null; shown while dragging.
function edgeRefusal(from, to) {
  if (from === to) return "an operator cannot feed itself";
  if (catalog.get(opById(from)?.type)?.role === "sink") return `${from} is a sink: it has no output`;
  if (catalog.get(opById(to)?.type)?.role === "source") return `${to} is a source: it takes no input`;
  if (state.doc.edges.some((e) => e.from === from && e.to === to)) return "they are already connected";
  if (reaches(to, from)) return `it would make a cycle: ${to} already feeds ${from}`;
  return null;
}

function showDragState(drag) {
  const hint = $("connect-hint");
  if (!drag) hint.textContent = "";
  else if (!drag.to) hint.textContent = `Connecting from ${drag.from}: drop on the operator it feeds (Esc cancels).`;
  else if (drag.why) hint.textContent = `${drag.from} → ${drag.to} refused: ${drag.why}.`;
  else hint.textContent = `Release to connect ${drag.from} → ${drag.to}.`;
}

// The server's problems that make an edge wrong whatever comes next (a cycle, an input into a
// source, an output out of a sink). Any other new problem is what an unfinished graph still
// lacks (an output that reaches no sink yet), shown on the operators once the edge is in.
const EDGE_REFUSALS = /is on a cycle|cannot have inputs|cannot have outputs/;

// An edge is added unless it brings a problem no later edit could fix; then it is rejected
// with the server's messages, and the document stays as it was.
async function connect(from, to) {
  state.connectFrom = null;
  $("connect-hint").textContent = "";
  const message = $("edge-message");
  const reject = (why) => {
    message.textContent = `Edge ${from} → ${to} rejected: ${why}`;
    message.hidden = false;
    render();
  };
  // The editor's own reasons (edgeRefusal) are shown while dragging; on release the server
  // judges the edge and its messages are the ones shown, as for any other edit.
  if (from === to) return reject("an operator cannot feed itself");
  if (state.doc.edges.some((e) => e.from === from && e.to === to)) return reject("they are already connected");
  const candidate = structuredClone(state.doc);
  candidate.edges.push({ from, to });
  const [now, after] = await Promise.all([check(state.doc), check(candidate)]);
  const known = new Set((now.problems || []).map((p) => `${p.where}|${p.message}`));
  const added = (after.problems || []).filter((p) => !known.has(`${p.where}|${p.message}`)
    && EDGE_REFUSALS.test(p.message));
  if (added.length) return reject(added.map((p) => `${p.where}: ${p.message}`).join("; "));
  message.hidden = true;
  state.doc = candidate;
  state.selected = { operator: to };
  changed();
}

function removeEdge(key) {
  // One edge goes, even where an imported document repeats it.
  const index = state.doc.edges.findIndex((e) => edgeKey(e) === key);
  if (index >= 0) state.doc.edges.splice(index, 1);
  if (state.selected?.edge === key) state.selected = null;
  changed();
}

function deleteOperator(id) {
  state.doc.operators = state.doc.operators.filter((o) => o.id !== id);
  state.doc.edges = state.doc.edges.filter((e) => e.from !== id && e.to !== id);
  if (state.selected?.operator === id) state.selected = null;
  if (state.connectFrom === id) state.connectFrom = null;
  changed();
}

function uniqueId(type) {
  const base = type.split(".").pop().replace(/[^a-z0-9_]/g, "_");
  let id = base, n = 2;
  while (opById(id)) id = `${base}_${n++}`;
  return id;
}

function addOperator(type) {
  const entry = catalog.get(type);
  const params = {};
  for (const p of entry.params) if (p.required && p.default != null) params[p.name] = p.default;
  const id = uniqueId(type);
  const previous = state.selected?.operator;
  state.doc.operators.push({ id, type, params });
  // A new operator is fed by the selected one when that is a natural next step.
  const prevType = previous && catalog.get(opById(previous)?.type || "");
  if (prevType && prevType.role !== "sink" && entry.role !== "source") state.doc.edges.push({ from: previous, to: id });
  state.selected = { operator: id };
  changed();
  graph.nodes[id]?.querySelector(".op-select")?.focus();
}

function renameOperator(oldId, newId) {
  if (!newId || newId === oldId) return;
  if (opById(newId)) { inspector.alert(`${newId} is already used`); return; }
  opById(oldId).id = newId;
  for (const e of state.doc.edges) {
    if (e.from === oldId) e.from = newId;
    if (e.to === oldId) e.to = newId;
  }
  state.selected = { operator: newId };
  changed();
}

// ---- palette -----------------------------------------------------------------------------

function renderPalette() {
  const list = $("palette-list");
  for (const [role, title] of [["source", "Sources"], ["operator", "Transforms"], ["sink", "Sinks"]]) {
    const h = document.createElement("h3");
    h.className = "sub";
    h.textContent = title;
    list.append(h);
    for (const t of config.catalog.filter((c) => c.role === role)) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = `palette-item role-${role}`;
      b.dataset.type = t.type;
      b.innerHTML = `<span class="pt">${esc(t.type)}</span><span class="ps">${esc(t.state_kind)}</span>`;
      b.title = t.doc;
      b.setAttribute("aria-label", `Add ${t.type}: ${t.doc}`);
      b.addEventListener("click", () => addOperator(t.type));
      list.append(b);
    }
  }
}

const editor = { state, config, catalog, opById, edgeKey, problemsOf, changed, showProblems,
  connect, removeEdge, deleteOperator, renameOperator };
const inspector = createInspector(editor);
const canvas = createCanvasView($("editor-graph"), { refusal: edgeRefusal, connect, onDragState: showDragState });

setupDocumentIO(editor);
renderPalette();
$("undo").addEventListener("click", undo);
$("redo").addEventListener("click", redo);
$("shortcuts-open").addEventListener("click", () => $("shortcuts").showModal());
state.last = JSON.stringify(state.doc);
const savedDocument = state.last;
updateHistoryButtons();
render();
if (state.doc.operators.length) {
  validate();
} else {
  // Nothing to check before the first action: a blank job is not "2 problems", and not valid.
  state.problems = [{ where: "document", message: NO_OPERATORS }];
  showProblems();
  $("validity").textContent = "empty";
}

// Work not saved yet is not lost to a click on a link or a closed tab without a question.
window.addEventListener("beforeunload", (event) => {
  if (state.saving || state.last === savedDocument) return;
  event.preventDefault();
  event.returnValue = "";  // older browsers ask only when it is set
});
