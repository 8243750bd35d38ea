// The job graph on a canvas: dagre computes a left-to-right layout, edges are SVG paths and
// operators are HTML elements, so their controls are ordinary focusable buttons and inputs.
/* global dagre */

const SVG = "http://www.w3.org/2000/svg";

export function layoutGraph(document_, size, rankdir = "LR") {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir, nodesep: size.nodesep ?? 22, ranksep: size.ranksep ?? 48,
               marginx: 12, marginy: 12 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const op of document_.operators) g.setNode(op.id, { width: size.width, height: size.height });
  for (const e of document_.edges) {
    if (g.hasNode(e.from) && g.hasNode(e.to) && e.from !== e.to) g.setEdge(e.from, e.to);
  }
  dagre.layout(g);
  const nodes = {};
  for (const id of g.nodes()) nodes[id] = g.node(id);
  const edges = g.edges().map((e) => ({ from: e.v, to: e.w, points: g.edge(e).points }));
  const graph = g.graph();
  return { nodes, edges, rankdir, width: Math.max(graph.width || 0, 120), height: Math.max(graph.height || 0, 80) };
}

// The scale at which a layout fits the room it is given, never above 1.
const fitScale = (laid, width, height) => Math.min(1, width / laid.width, height / laid.height);

// Left to right when the graph fits the width at `minScale` or more; otherwise top to bottom
// if that shows it larger, so a long pipeline in a narrow column keeps readable text instead
// of shrinking (or running off the side).
function layoutForRoom(document_, size, { orient, width, height }) {
  const across = layoutGraph(document_, size, "LR");
  if (orient !== "auto" || fitScale(across, width, height) >= (size.minScale ?? 1)) return across;
  const down = layoutGraph(document_, size, "TB");
  return fitScale(down, width, height) > fitScale(across, width, height) ? down : across;
}

// A node's texts are cut with an ellipsis when there is no room; the whole text is its title.
function titleCutTexts(el) {
  for (const text of el.querySelectorAll(".op-id, .op-type")) {
    if (!text.title) text.title = text.textContent;
  }
}

function edgePath(points) {
  const [first, ...rest] = points;
  return `M${first.x},${first.y} ` + rest.map((p) => `L${p.x},${p.y}`).join(" ");
}

function arrowMarker(svg, id) {
  const defs = document.createElementNS(SVG, "defs");
  const marker = document.createElementNS(SVG, "marker");
  for (const [k, v] of Object.entries({ id, viewBox: "0 0 10 10", refX: "9", refY: "5",
    markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" })) marker.setAttribute(k, v);
  const tip = document.createElementNS(SVG, "path");
  tip.setAttribute("d", "M 0 0 L 10 5 L 0 10 z");
  tip.setAttribute("class", "edge-tip");
  marker.append(tip);
  defs.append(marker);
  svg.append(defs);
}

// Draws the graph into `container`, replacing what was there. `renderNode(op, element)` fills
// each operator's element; `edgeClass(edge)` may add a class to an edge; `onEdgeClick(edge)`
// makes edges clickable. `orient: "auto"` lets a graph too long for the width run top to
// bottom (see layoutForRoom); `scaleToFit: false` leaves the scale to the caller (the editor
// pans and zooms). Returns {nodes: {id: element}, fit(), layout, stage}.
export function drawGraph(container, document_, options) {
  const { size, renderNode, edgeClass, onEdgeClick, minScale = 0.55, orient = "LR",
    scaleToFit = true, maxHeight = Infinity } = options;
  const laid = layoutForRoom(document_, { ...size, minScale }, {
    orient, width: container.clientWidth - 2, height: maxHeight });
  const stage = document.createElement("div");
  stage.className = `graph-stage rank-${laid.rankdir.toLowerCase()}`;
  stage.style.width = `${laid.width}px`;
  stage.style.height = `${laid.height}px`;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "graph-edges");
  svg.setAttribute("width", laid.width);
  svg.setAttribute("height", laid.height);
  svg.setAttribute("aria-hidden", "true");
  const markerId = `arrow-${container.id || "graph"}`;
  arrowMarker(svg, markerId);
  for (const edge of laid.edges) {
    const d = edgePath(edge.points);
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", d);
    path.setAttribute("class", `edge ${edgeClass ? edgeClass(edge) : ""}`.trim());
    path.setAttribute("marker-end", `url(#${markerId})`);
    path.dataset.edge = `${edge.from}->${edge.to}`;
    svg.append(path);
    if (onEdgeClick) {
      const hit = document.createElementNS(SVG, "path");
      hit.setAttribute("d", d);
      hit.setAttribute("class", "edge-hit");
      hit.addEventListener("click", () => onEdgeClick(edge));
      svg.append(hit);
    }
  }
  stage.append(svg);
  const elements = {};
  for (const op of document_.operators) {
    const at = laid.nodes[op.id];
    const el = document.createElement("div");
    el.className = "node";
    el.dataset.operator = op.id;
    el.style.left = `${at.x - size.width / 2}px`;
    el.style.top = `${at.y - size.height / 2}px`;
    el.style.width = `${size.width}px`;
    el.style.height = `${size.height}px`;
    renderNode(op, el);
    titleCutTexts(el);
    stage.append(el);
    elements[op.id] = el;
  }
  container.replaceChildren(stage);
  const fit = () => {
    const available = container.clientWidth - 2;
    const scale = Math.max(minScale, Math.min(1, available / laid.width));
    // zoom (unlike a transform) shrinks the layout box too, so no blank scroll area remains.
    stage.style.zoom = scale < 1 ? String(scale) : "";
  };
  if (scaleToFit) fit();
  return { nodes: elements, fit, layout: laid, stage };
}
