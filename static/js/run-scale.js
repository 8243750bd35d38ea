// The run page's scaling dialog: `+`/`-`, the ETP policy's add/remove, rollbacks and the
// autoscaler's recommendations all fill one server-rendered form, whose preview and submit are
// htmx requests; the page then shows the change as pending until the driver applies it.
/* global htmx */
import { $ } from "./dom.js";

export function setupScaling({ state, refreshSteps }) {
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

  document.querySelectorAll("[data-policy]").forEach((b) => b.addEventListener("click", () => {
    const n = Number($("policy-instances").value) || 1;
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

  return { openRescale };
}
