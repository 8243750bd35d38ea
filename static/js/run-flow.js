// The live graph as a flow view: the rows per second on every edge and each operator's
// back-pressure level, redrawn with each epoch. Every row an operator emits goes to each of its
// outputs, so an edge carries its upstream operator's output rate (the same mean over the last
// epochs as the node's out/s). Levels are Flink's, judged on the busiest instance's share of
// the epoch: OK up to 10 % busy, LOW up to 50 %, HIGH above.
import { formatRate } from "./charts.js";
import { meanOf } from "./smoothing.js";

const SVG = "http://www.w3.org/2000/svg";
export const LEVELS = [[0.1, "ok", "OK"], [0.5, "low", "LOW"], [Infinity, "high", "HIGH"]];

export function backPressureLevel(busyShare) {
  return LEVELS.find(([upTo]) => busyShare <= upTo);
}

// The point halfway along an edge's polyline, where its label goes.
function midpoint(points) {
  const lengths = points.slice(1).map((p, i) => Math.hypot(p.x - points[i].x, p.y - points[i].y));
  let left = lengths.reduce((a, b) => a + b, 0) / 2;
  for (let i = 0; i < lengths.length; i++) {
    if (left <= lengths[i] && lengths[i] > 0) {
      const f = left / lengths[i];
      return { x: points[i].x + f * (points[i + 1].x - points[i].x),
               y: points[i].y + f * (points[i + 1].y - points[i].y) };
    }
    left -= lengths[i];
  }
  return points[0];
}

function edgeLabel(svg, edge) {
  const at = midpoint(edge.points);
  const text = document.createElementNS(SVG, "text");
  text.setAttribute("class", "edge-rate");
  text.setAttribute("x", String(at.x));
  text.setAttribute("y", String(at.y - 4));
  text.setAttribute("text-anchor", "middle");
  text.dataset.edge = `${edge.from}->${edge.to}`;
  text.textContent = "—";
  svg.append(text);
  return text;
}

function badge(node) {
  const el = document.createElement("span");
  el.className = "bp-badge";
  el.dataset.level = "";
  el.textContent = "—";
  el.setAttribute("role", "img");
  node.append(el);
  return el;
}

// `graph` is what drawGraph returned. Returns {apply(m, recent, fields)}, to be called with each
// epoch's live metrics, the epochs the page's figures are over, and the snapshot's live_fields.
export function setupFlow(graph) {
  const svg = graph.stage.querySelector("svg.graph-edges");
  const labels = graph.layout.edges.map((edge) => [edge, edgeLabel(svg, edge)]);
  const badges = Object.fromEntries(Object.entries(graph.nodes).map(([id, el]) => [id, badge(el)]));

  function apply(m, recent, fields) {
    const at = (values, name) => (values ? values[fields.indexOf(name)] : null);
    for (const [edge, text] of labels) {
      const rate = meanOf(recent.map((r) => at(r.ops[edge.from], "output_rate")));
      const shown = rate == null ? "—" : `${formatRate(rate)}/s`;
      if (text.textContent !== shown) text.textContent = shown;
    }
    for (const [id, el] of Object.entries(badges)) {
      const busy = at(m.ops[id], "busy");
      if (busy == null || !m.d) {
        el.dataset.level = "";
        el.textContent = "—";
        el.setAttribute("aria-label", `back-pressure of ${id}: not measured this epoch`);
        el.title = "Back-pressure: not measured this epoch";
        continue;
      }
      const share = Math.min(1, busy / m.d);
      const [, level, label] = backPressureLevel(share);
      const region = at(m.ops[id], "region");
      const whose = region ? `region ${region}'s busiest instance (Spark runs it as one stage)` : "its busiest instance";
      el.dataset.level = level;
      el.textContent = label;
      el.title = `Back-pressure ${label}: ${whose} was busy ${(100 * share).toFixed(0)} % of the last epoch (OK ≤ 10 %, LOW ≤ 50 %, HIGH above)`;
      el.setAttribute("aria-label", `back-pressure of ${id}: ${label}`);
    }
  }
  return { apply };
}
