// The editor's document in and out: name and key groups, JSON import and export, saving as a
// new version, and the conflict shown when someone else saved meanwhile.
import { $, esc, csrfToken } from "./dom.js";
import { liveStateLabel, openLiveSocket } from "./live-socket.js";

// The document's keys in reading order, as the server shows it (engine/dag/document.py):
// name, key_groups, operators, edges; an operator's id, type, parallelism, params; an edge's
// from before to. Keys it does not know keep their order after the known ones.
const DOCUMENT_ORDER = ["name", "key_groups", "operators", "edges"];
const OPERATOR_ORDER = ["id", "type", "parallelism", "params"];
const EDGE_ORDER = ["from", "to"];

function inOrder(item, order) {
  if (!item || typeof item !== "object" || Array.isArray(item)) return item;
  const known = order.filter((k) => k in item);
  return Object.fromEntries([...known, ...Object.keys(item).filter((k) => !order.includes(k))]
    .map((k) => [k, item[k]]));
}

export function documentInOrder(doc) {
  const shown = inOrder(doc, DOCUMENT_ORDER);
  if (Array.isArray(shown.operators)) shown.operators = shown.operators.map((o) => inOrder(o, OPERATOR_ORDER));
  if (Array.isArray(shown.edges)) shown.edges = shown.edges.map((e) => inOrder(e, EDGE_ORDER));
  return shown;
}

export function setupDocumentIO(editor) {
  const { state, config, changed, showProblems } = editor;
  const csrf = csrfToken();

  $("doc-name").addEventListener("input", (ev) => {
    state.doc.name = ev.target.value.trim();
    ev.target.removeAttribute("aria-invalid");
    changed({ redraw: false });
  });
  $("doc-key-groups").addEventListener("input", (ev) => {
    const n = Number(ev.target.value);
    state.doc.key_groups = Number.isInteger(n) && n > 0 ? n : ev.target.value;
    changed({ redraw: false });
  });

  $("export").addEventListener("click", () => {
    const blob = new Blob([JSON.stringify(documentInOrder(state.doc), null, 2)], { type: "application/json" });
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = `${state.doc.name || "job"}.json`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  });

  $("import-file").addEventListener("change", async (ev) => {
    const file = ev.target.files[0];
    if (!file) return;
    try {
      const parsed = JSON.parse(await file.text());
      if (typeof parsed !== "object" || !Array.isArray(parsed.operators)) throw new Error("it has no operators list");
      parsed.edges ??= [];
      if (config.job) { parsed.name = config.job_name; parsed.key_groups = state.doc.key_groups; }
      state.doc = parsed;
      state.selected = null;
      $("save-status").textContent = `Imported ${file.name}.`;
      changed();
    } catch (error) {
      $("save-status").textContent = `Could not import ${file.name}: ${error.message}`;
    }
    ev.target.value = "";
  });

  // ---- saving and conflicts ----------------------------------------------------------------

  function showConflict(latest, author, comment) {
    const box = $("conflict");
    const base = config.base_version;
    box.innerHTML = `<strong>Version ${Number(latest)} was saved${author ? ` by ${esc(author)}` : ""} after you opened v${base}.</strong>
      ${comment ? `<span class="muted">“${esc(comment)}”</span>` : ""}
      Saving now would be refused; your changes stay here. <a href="/jobs/${config.job}/diff/?a=${base}&b=${latest}">Compare v${base} with v${latest}</a>
      · <a href="/jobs/${config.job}/edit/?version=${latest}">Open v${latest} in the editor</a> (export your draft first to keep it)`;
    box.hidden = false;
  }

  async function showNewerVersion() {
    const job = await (await fetch(`/api/jobs/${config.job}`)).json();
    const latest = job.versions[job.versions.length - 1];
    if (latest.number <= config.base_version) return false;
    showConflict(latest.number, latest.author, latest.comment);
    return true;
  }

  async function save() {
    if (state.saving) return;
    state.saving = true;
    $("save").disabled = true;
    const status = $("save-status");
    status.textContent = "Saving…";
    const comment = $("save-comment").value.trim();
    const url = config.job ? `/api/jobs/${config.job}/versions` : `/api/jobs?comment=${encodeURIComponent(comment)}`;
    const dag = documentInOrder(state.doc);
    const body = config.job ? { dag, base_version: config.base_version, comment } : dag;
    try {
      // Look before saving: a newer version means a conflict, shown without a refused request.
      if (config.job && (await showNewerVersion())) {
        status.textContent = "Not saved: someone saved a newer version.";
        state.saving = false;
        $("save").disabled = state.problems.length > 0;
        return;
      }
      const response = await fetch(url, {
        method: "POST", headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
        body: JSON.stringify(body),
      });
      const answer = await answerOf(response);
      if (response.status === 201) {
        status.textContent = `Saved as version ${answer.version}.`;
        window.location.assign(`/jobs/${answer.id}/?version=${answer.version}`);
        return;
      }
      if (response.status === 409 && !config.job) {
        // A new job whose name is taken: not a version conflict.
        status.textContent = `Not saved: ${answer.error || `a job named “${state.doc.name}” exists`}; choose another name.`;
        $("doc-name").setAttribute("aria-invalid", "true");
      } else if (response.status === 409) {
        if (!(await showNewerVersion())) status.textContent = `Not saved: ${answer.error || "conflict"}`;
        else status.textContent = "Not saved: someone saved a newer version.";
      } else {
        if (answer.problems) { state.problems = answer.problems; showProblems(); }
        // Its problems join the list (and the badge's count); the next change clears it.
        status.textContent = answer.problems
          ? "Not saved: the server found problems (listed under Problems)."
          : `Not saved: ${answer.error || response.statusText}`;
        status.dataset.refused = "true";
      }
    } catch (error) {
      status.textContent = `Not saved: ${error.message}`;
    }
    state.saving = false;
    $("save").disabled = state.problems.length > 0;
  }

  // Every answer is shown as its message, JSON or not (a proxy's error page, a server error).
  async function answerOf(response) {
    const text = await response.text();
    try {
      return JSON.parse(text);
    } catch {
      return { error: `the server answered ${response.status} ${response.statusText}`.trim() };
    }
  }

  $("save").addEventListener("click", save);

  function watchJob() {
    if (!config.ws) return;
    openLiveSocket({
      path: config.ws,
      label: liveStateLabel($("validity")),
      onMessage: (event) => {
        // Every (re)connection says hello: a version saved while the page was not listening
        // is found by asking.
        if (event.type === "hello" && !state.saving) showNewerVersion();
        if (event.type === "job.version_created" && event.version > config.base_version && !state.saving) {
          showConflict(event.version, event.author, event.comment);
        }
      },
    });
  }

  watchJob();
}
