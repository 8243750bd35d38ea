// The run page's scaling dialog: `+`/`-`, the ETP policy's add/remove, rollbacks and the
// autoscaler's recommendations all fill one server-rendered form, whose preview and submit are
// htmx requests; the page then shows the change as pending until the driver applies it.
/* global htmx */
import { $ } from "./dom.js";

export function setupScaling({ state, refreshSteps, setStatus }) {
  const dialog = $("scale-dialog");
  const form = $("scale-form");

  function newRequestId() {
    // No dots: the control plane numbers the commands of one request as "<id>.<n>".
    if (crypto.randomUUID) return crypto.randomUUID().replaceAll("-", "");
    return Date.now().toString(36) + Math.random().toString(36).slice(2);
  }

  function openDialog(fields, summary, reason = "") {
    if (!dialog) return;
    for (const name of ["kind", "operator", "parallelism", "instances", "to_reconfiguration"]) {
      form.elements[name].value = fields[name] ?? "";
    }
    form.elements.request_id.value = newRequestId();
    form.elements.reason.value = reason;
    $("scale-summary").textContent = summary;
    $("scale-outcome").replaceChildren();
    $("scale-preview").innerHTML = '<p class="muted">Loading the preview…</p>';
    $("scale-apply").disabled = false;
    dialog.showModal();
    form.elements.reason.focus();
    htmx.trigger($("scale-preview"), "preview");
  }

  function openRescale(opId, parallelism, reason = "") {
    openDialog({ kind: "rescale", operator: opId, parallelism },
      `Rescale ${opId}: ${state.instances[opId]} → ${parallelism} instances`, reason);
  }

  // The instances field takes what the server accepts: a whole number from 1 to the bound
  // of each direction; a button whose request would be refused is disabled with the reason.
  function policyProblem(kind) {
    const input = $("policy-instances");
    const text = input.value.trim();
    const n = Number(text);
    const out = kind === "scale_out";
    const max = Number(out ? input.dataset.addMax : input.dataset.removeMax);
    if (state.lastEpoch === null) return "Nothing is measured before the run's first epoch: no change is offered yet.";
    if (!/^\d+$/.test(text) || n < 1) return "Instances: enter a whole number of at least 1.";
    if (max === 0 && out && input.dataset.addReason) return `None can be added now: ${input.dataset.addReason}.`;
    if (max === 0) return out ? "No operator can take another instance now." : "Every operator already runs a single instance.";
    if (n > max) return `Instances: at most ${max} can be ${out ? "added" : "removed"} now.`;
    return null;
  }

  function refreshPolicy() {
    const problems = [];
    document.querySelectorAll("[data-policy]").forEach((b) => {
      const problem = policyProblem(b.dataset.policy);
      b.disabled = problem !== null;
      b.title = problem || "";
      if (problem) problems.push(problem);
    });
    const box = $("policy-problem");
    if (!box) return;
    // Both refused: say why; one refused: its button's title says it.
    box.textContent = problems.length === 2 ? problems[0] : "";
    box.hidden = problems.length < 2;
  }

  const policyInput = $("policy-instances");
  if (policyInput) {
    policyInput.addEventListener("input", refreshPolicy);
    refreshPolicy();
  }

  document.querySelectorAll("[data-policy]").forEach((b) => b.addEventListener("click", () => {
    if (policyProblem(b.dataset.policy)) { refreshPolicy(); return; }
    const n = Number($("policy-instances").value);
    const out = b.dataset.policy === "scale_out";
    openDialog({ kind: b.dataset.policy, instances: n },
      `${out ? "Add" : "Remove"} ${n} instance${n === 1 ? "" : "s"} where the ETP policy chooses`);
  }));

  // Buttons inside swapped fragments (rollback, recommendations) are handled by delegation.
  document.body.addEventListener("click", (event) => {
    const rollback = event.target.closest("[data-rollback]");
    if (rollback) {
      openDialog({ kind: "rollback", to_reconfiguration: rollback.dataset.rollback },
        `Roll back ${rollback.dataset.label}: restore the plan it replaced`);
    }
    const recommend = event.target.closest("[data-recommend-op]");
    if (recommend) {
      openRescale(recommend.dataset.recommendOp, Number(recommend.dataset.recommendN),
        recommend.dataset.recommendReason || "");
    }
  });

  if (dialog) {
    $("scale-cancel").addEventListener("click", () => dialog.close());
    // Apply stays disabled while the preview (the same checks as applying) refuses.
    $("scale-preview").addEventListener("htmx:afterSettle", () => {
      const refused = $("scale-preview").querySelector("[data-refused]") !== null;
      $("scale-apply").disabled = refused;
      $("scale-apply").title = refused ? "The server refuses this change: see above" : "";
    });
    form.addEventListener("htmx:afterRequest", (event) => {
      if (event.detail.elt !== form || !event.detail.successful) return;
      const done = $("scale-outcome").querySelector("[data-reconfiguration-requested]");
      if (done) {
        if (form.elements.operator.value) state.pendingOps.add(form.elements.operator.value);
        refreshSteps();
        $("scale-apply").disabled = true;
        setTimeout(() => dialog.close(), 700);
      }
    });
  }

  setupStop(setStatus);
  return { openRescale, refreshPolicy };
}

// Stop run: a confirmation with a required reason; once the server accepts, the run is
// stopping and the control goes away without a reload.
function setupStop(setStatus) {
  const dialog = $("stop-dialog");
  if (!dialog) return;
  const form = $("stop-form");
  $("stop-open").addEventListener("click", () => {
    form.elements.reason.value = "";
    $("stop-outcome").replaceChildren();
    $("stop-confirm").disabled = false;
    dialog.showModal();
    form.elements.reason.focus();
  });
  $("stop-cancel").addEventListener("click", () => dialog.close());
  form.addEventListener("htmx:afterRequest", (event) => {
    if (event.detail.elt !== form || !event.detail.successful) return;
    if ($("stop-outcome").querySelector("[data-stop-requested]")) {
      $("stop-confirm").disabled = true;
      $("stop-open").hidden = true;
      setStatus("stopping");
      setTimeout(() => dialog.close(), 700);
    }
  });
}
