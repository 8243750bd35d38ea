// The editor's side panel: the selected operator's form (rendered from its param schema), its
// edges and problems, or the selected edge.
import { $, esc, nodeButton } from "./dom.js";
import { paramField } from "./params.js";

export function createInspector(editor) {
  const { state, catalog, opById, edgeKey, problemsOf, changed, connect, removeEdge,
    deleteOperator, renameOperator } = editor;

  function alertInspector(text) {
    const p = document.createElement("p");
    p.className = "error";
    p.setAttribute("role", "alert");
    p.textContent = text;
    $("inspector").prepend(p);
  }

  function renderInspectorProblems() {
    const box = document.querySelector("#inspector .op-problems");
    if (!box || !state.selected) return;
    const mine = problemsOf(state.selected);
    box.replaceChildren(...mine.map((p) => {
      const li = document.createElement("li");
      li.textContent = p.message;
      return li;
    }));
    box.hidden = mine.length === 0;
  }

  function edgeRow(e) {
    const li = document.createElement("li");
    li.append(document.createTextNode(`${e.from} → ${e.to} `));
    li.append(nodeButton("Remove", `Remove edge ${e.from} to ${e.to}`, () => removeEdge(edgeKey(e)), "small-button"));
    return li;
  }

  function renderInspector() {
    const box = $("inspector");
    box.replaceChildren();
    if (state.selected?.edge) {
      const e = state.doc.edges.find((x) => edgeKey(x) === state.selected.edge);
      if (!e) { state.selected = null; return renderInspector(); }
      box.innerHTML = `<p><strong>Edge</strong> <code>${esc(e.from)}</code> → <code>${esc(e.to)}</code></p><ul class="op-problems problems" hidden></ul>`;
      box.append(nodeButton("Remove this edge", `Remove edge ${e.from} to ${e.to}`, () => removeEdge(edgeKey(e)), ""));
      return;
    }
    const op = state.selected?.operator && opById(state.selected.operator);
    if (!op) {
      box.innerHTML = `<p class="muted">Select an operator to edit its parameters. ${state.doc.edges.length} edges:</p>`;
      const ul = document.createElement("ul");
      ul.className = "edge-list";
      state.doc.edges.forEach((e) => ul.append(edgeRow(e)));
      box.append(ul);
      return;
    }
    const type = catalog.get(op.type);
    const form = document.createElement("form");
    form.className = "op-form";
    form.setAttribute("aria-label", `Parameters of ${op.id}`);
    form.addEventListener("submit", (event) => event.preventDefault());
    form.innerHTML = `<p class="muted small">${esc(op.type)} · ${type ? type.state_kind : "unknown type"}${type ? ` — ${esc(type.doc)}` : ""}</p>
      <ul class="op-problems problems" hidden></ul>`;
    const idField = document.createElement("div");
    idField.className = "field";
    idField.innerHTML = `<label for="op-id">Operator id</label><input id="op-id" value="${esc(op.id)}" pattern="[a-z][a-z0-9_]*" required><div class="hint">lower case, digits and _</div>`;
    idField.querySelector("input").addEventListener("change", (ev) => renameOperator(op.id, ev.target.value.trim()));
    form.append(idField);
    const par = document.createElement("div");
    par.className = "field";
    par.innerHTML = `<label for="op-parallelism">Parallelism</label><input id="op-parallelism" type="number" min="1" step="1" value="${op.parallelism || 1}">`;
    par.querySelector("input").addEventListener("input", (ev) => {
      const n = Number(ev.target.value);
      if (Number.isInteger(n) && n > 1) op.parallelism = n; else delete op.parallelism;
      changed({ redraw: false });
    });
    form.append(par);
    for (const param of type ? type.params : []) {
      form.append(paramField(param, op.params?.[param.name], `param-${op.id}`, (value) => {
        op.params ??= {};
        if (value === undefined) delete op.params[param.name]; else op.params[param.name] = value;
        changed({ redraw: false });
      }));
    }
    const inputs = state.doc.edges.filter((e) => e.to === op.id).map((e) => e.from);
    const cols = inputs.length ? state.columns[inputs[0]] : null;
    if (cols) {
      const hint = document.createElement("p");
      hint.className = "hint";
      hint.textContent = `Input columns: ${Object.entries(cols).map(([c, t]) => `${c} (${t})`).join(", ")}`;
      form.append(hint);
    }
    box.append(form);
    const edges = document.createElement("div");
    edges.innerHTML = '<h3 class="sub">Edges</h3>';
    const ul = document.createElement("ul");
    ul.className = "edge-list";
    state.doc.edges.filter((e) => e.from === op.id || e.to === op.id).forEach((e) => ul.append(edgeRow(e)));
    edges.append(ul);
    if (!type || type.role !== "sink") {
      const row = document.createElement("div");
      row.className = "row";
      // Only operators that may take this one's rows: not itself, no source, none it feeds already.
      const fed = new Set(state.doc.edges.filter((e) => e.from === op.id).map((e) => e.to));
      const others = state.doc.operators.filter((o) => o.id !== op.id && !fed.has(o.id)
        && catalog.get(o.type)?.role !== "source");
      row.innerHTML = `<label class="inline-label" for="connect-to">Feeds</label><select id="connect-to">${others.map((o) => `<option value="${esc(o.id)}">${esc(o.id)}</option>`).join("")}</select>`;
      row.append(nodeButton("Connect", `Connect ${op.id} to the chosen operator`, () => {
        const to = $("connect-to").value;
        if (to) connect(op.id, to);
      }, "small-button connect-to"));
      edges.append(row);
    }
    box.append(edges);
    box.append(nodeButton(`Delete ${op.id}`, `Delete operator ${op.id}`, () => deleteOperator(op.id), "danger delete-op"));
    renderInspectorProblems();
  }

  return { render: renderInspector, renderProblems: renderInspectorProblems, alert: alertInspector };
}
