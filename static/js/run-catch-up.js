// When a run with a backlog will have caught up, at the current rates: the backlog divided by
// how fast it drains (the sources' backlog growth, negative while draining), both over the
// epochs the page's figures are over. A backlog that grows or holds never catches up at these
// rates, and the line says so instead of giving a time.
import { formatRate } from "./charts.js";
import { meanOf } from "./smoothing.js";

export function formatDuration(seconds) {
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
  const h = Math.floor(s / 3600);
  if (h >= 48) return `${Math.round(h / 24)} days`;
  return `${h} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`;
}

const clock = (t) => `${new Date(t * 1000).toISOString().slice(11, 19)} UTC`;

// {state, text, title}: state is caught-up, catching-up, falling-behind or unknown.
export function catchUp(m, recent) {
  const backlog = m.backlog ?? 0;
  const growth = meanOf(recent.map((r) => r.growth));
  if (backlog <= 0) return { state: "caught-up", text: "caught up", title: "No rows wait at the sources" };
  if (growth == null) {
    return { state: "unknown", text: "—", title: "The sources report no backlog growth, so no drain rate is known" };
  }
  if (growth >= 0) {
    return { state: "falling-behind", text: "not at these rates",
             title: `The backlog grows by ${formatRate(growth)} rows/s: the run processes less than its sources offer` };
  }
  const seconds = backlog / -growth;
  return { state: "catching-up", text: `in ${formatDuration(seconds)}`, at: `at ${clock(m.t + seconds)}`,
           title: `${formatRate(backlog)} rows wait and drain at ${formatRate(-growth)} rows/s` };
}

// Shows the estimate in `element` (its title says how it was reached).
export function showCatchUp(element, m, recent) {
  const { state, text, title, at } = catchUp(m, recent);
  element.textContent = text;
  if (at) {
    // The time on a line of its own, as the backlog's trend beside it.
    const line = document.createElement("small");
    line.className = "trend";
    line.textContent = at;
    element.append(line);
  }
  element.title = title;
  element.dataset.state = state;
}
