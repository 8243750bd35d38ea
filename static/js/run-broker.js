// The run page's broker sources: each stream's lag behind its tail (the run's backlog) and
// the entries that did not fit the schema (dead letters: the run's count and a sample).
import { esc } from "./dom.js";

export function setupBroker(section, sources) {
  const ids = Object.keys(sources || {});
  if (!section || !ids.length) return { apply() {}, count() {} };
  const totals = Object.fromEntries(ids.map((id) => [id, sources[id].dead_letters || 0]));
  section.hidden = false;
  section.innerHTML = `<h2 id="broker-title">Broker sources</h2>${ids.map((id) => {
    const s = sources[id];
    const rows = (s.streams || []).map((stream) =>
      `<tr><td>${esc(stream)}</td><td class="num" data-lag="${esc(id)}/${esc(stream)}">—</td></tr>`).join("");
    return `<div class="broker-source" data-source="${esc(id)}">
      <p><b>${esc(id)}</b> <span class="muted">${esc(s.url || "")}</span></p>
      <table class="grid compact"><thead><tr><th>Stream</th><th class="num">Lag (entries)</th></tr></thead><tbody>${rows}</tbody></table>
      <p>Dead letters: <b data-dead="${esc(id)}">${totals[id]}</b>
        <span class="muted small" data-sample="${esc(id)}">${esc(s.sample || "")}</span></p>
    </div>`;
  }).join("")}`;

  // The latest epoch's lag per stream and dead-letter sample.
  function apply(live) {
    for (const [id, report] of Object.entries(live || {})) {
      for (const [stream, lag] of Object.entries(report.lag || {})) {
        const cell = section.querySelector(`[data-lag="${CSS.escape(`${id}/${stream}`)}"]`);
        if (cell) cell.textContent = Number(lag).toLocaleString();
      }
      const sample = section.querySelector(`[data-sample="${CSS.escape(id)}"]`);
      if (sample && report.sample) sample.textContent = report.sample;
    }
  }

  // A new epoch's dead letters added to the run's total (the page started from the server's).
  function count(live) {
    for (const [id, report] of Object.entries(live || {})) {
      if (!report.dl) continue;
      totals[id] = (totals[id] || 0) + report.dl;
      const dead = section.querySelector(`[data-dead="${CSS.escape(id)}"]`);
      if (dead) dead.textContent = totals[id].toLocaleString();
    }
  }
  return { apply, count };
}
