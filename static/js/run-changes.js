/* global htmx */
// The run page's panels for new params, a rebalance and a move to a newer version are
// server-rendered forms whose previews and submits are htmx requests. Once the server
// records a change, its form's Apply stays disabled: the change is in the list below. When
// the change ends (applied, rejected or failed, as the live socket says), its panel is
// rendered afresh for the same operator: the params, key groups or version it now shows are
// the run's, and a new request id makes the next change a new one.
const ENDED = new Set(["applied", "rejected", "failed"]);

export function setupChanges() {
  const requested = new Map(); // reconfiguration id -> the panel's slot that asked for it

  document.body.addEventListener("htmx:afterRequest", (event) => {
    const form = event.detail.elt;
    if (!(form instanceof HTMLFormElement) || !form.matches("[data-change-form]")) return;
    if (!event.detail.successful) return;
    const mark = form.querySelector("[data-reconfiguration-requested]");
    if (!mark) return;
    form.querySelectorAll("button[type=submit]").forEach((button) => {
      button.disabled = true;
      button.title = "Requested: see the reconfigurations";
    });
    const slot = form.closest("[data-panel]");
    if (slot) requested.set(Number(mark.dataset.reconfigurationRequested), slot);
  });

  document.body.addEventListener("reconfiguration-status", (event) => {
    const slot = requested.get(Number(event.detail.id));
    if (!slot || !ENDED.has(event.detail.status)) return;
    requested.delete(Number(event.detail.id));
    const picked = slot.querySelector("select[name=operator]");
    const url = new URL(slot.dataset.panel, window.location.href);
    if (picked) url.searchParams.set("operator", picked.value);
    htmx.ajax("GET", url.pathname + url.search, { target: slot, swap: "innerHTML" });
  });
}
