// The editor's canvas as a view: pan (drag the background), zoom (wheel, buttons, keys) and
// fit, kept across redraws; and drawing an edge by dragging from an operator's output port.
// The view never changes the document; an edge dropped on an operator goes through the
// editor's `connect`, so it is validated and undone like every other edit.
import { $ } from "./dom.js";

export const READABLE_SCALE = 0.9; // the first view of a graph never shrinks its text more
const MIN_SCALE = 0.5;
const MAX_SCALE = 2;
const MIN_HEIGHT = 280;
const MARGIN = 8;
const SVG = "http://www.w3.org/2000/svg";

const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));

// The tallest the canvas grows before a graph must be panned or zoomed to be seen whole.
export const canvasMaxHeight = () => Math.max(360, Math.round(window.innerHeight * 0.8));

export function createCanvasView(container, { refusal, connect, onDragState }) {
  const view = { scale: 1, x: MARGIN, y: MARGIN, manual: false };
  let graph = null;
  let drag = null; // the edge being drawn: {from, path, target}
  let pan = null;
  let draggedLast = false; // the port's click after a drag is not a click

  const room = () => ({ width: container.clientWidth, height: container.clientHeight });

  function fitted(min, max) {
    const laid = graph.layout;
    const { width, height } = room();
    const scale = clamp(Math.min((width - 2 * MARGIN) / laid.width, (height - 2 * MARGIN) / laid.height), min, max);
    return { scale, x: Math.max(MARGIN, (width - laid.width * scale) / 2), y: MARGIN };
  }

  function apply() {
    if (!graph) return;
    graph.stage.style.transformOrigin = "0 0";
    graph.stage.style.transform = `translate(${view.x}px, ${view.y}px) scale(${view.scale})`;
    container.dataset.scale = view.scale.toFixed(3);
    $("zoom-level").textContent = `${Math.round(view.scale * 100)} %`;
  }

  // Called after each redraw: the canvas is as tall as the graph needs at a readable scale
  // (within bounds), and an untouched view shows the graph at that scale.
  function attach(drawn) {
    graph = drawn;
    const laid = drawn.layout;
    const available = (container.clientWidth - 2 * MARGIN) / laid.width;
    const scale = clamp(Math.min(1, available), READABLE_SCALE, 1);
    container.style.height = `${clamp(laid.height * scale + 2 * MARGIN, MIN_HEIGHT, canvasMaxHeight())}px`;
    if (!view.manual) Object.assign(view, fitted(READABLE_SCALE, 1));
    apply();
  }

  function zoomAt(factor, px = room().width / 2, py = room().height / 2) {
    const scale = clamp(view.scale * factor, MIN_SCALE, MAX_SCALE);
    view.x = px - ((px - view.x) * scale) / view.scale;
    view.y = py - ((py - view.y) * scale) / view.scale;
    view.scale = scale;
    view.manual = true;
    apply();
  }

  // The whole graph in view, as large as fits (never above 100 %).
  function fit() {
    Object.assign(view, fitted(MIN_SCALE, 1), { manual: true });
    apply();
  }

  function panBy(dx, dy) {
    view.x += dx;
    view.y += dy;
    view.manual = true;
    apply();
  }

  const toStage = (event) => {
    const box = container.getBoundingClientRect();
    return { x: (event.clientX - box.left - container.clientLeft - view.x) / view.scale,
             y: (event.clientY - box.top - container.clientTop - view.y) / view.scale };
  };

  // ---- drawing an edge ---------------------------------------------------------------------

  function portPoint(id) {
    const at = graph.layout.nodes[id];
    return graph.layout.rankdir === "TB" ? { x: at.x, y: at.y + at.height / 2 } : { x: at.x + at.width / 2, y: at.y };
  }

  function nodeUnder(event) {
    const el = document.elementFromPoint(event.clientX, event.clientY)?.closest(".editor-node");
    return el && container.contains(el) ? el : null;
  }

  function markTarget(el) {
    if (drag.target && drag.target !== el) drag.target.classList.remove("drop-ok", "drop-refused");
    drag.target = el;
    if (!el || el.dataset.operator === drag.from) {
      onDragState({ from: drag.from });
      return;
    }
    const why = refusal(drag.from, el.dataset.operator);
    el.classList.toggle("drop-ok", !why);
    el.classList.toggle("drop-refused", Boolean(why));
    onDragState({ from: drag.from, to: el.dataset.operator, why });
  }

  function startDrag(from, event) {
    event.preventDefault();
    event.stopPropagation();
    const svg = graph.stage.querySelector("svg.graph-edges");
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("class", "edge drafting");
    svg.append(path);
    drag = { from, path, target: null, start: portPoint(from), origin: [event.clientX, event.clientY], moved: false };
    graph.nodes[from]?.classList.add("connect-source");
    event.target.setPointerCapture(event.pointerId);
    event.target.addEventListener("pointermove", dragMove);
    event.target.addEventListener("pointerup", dragEnd, { once: true });
    event.target.addEventListener("pointercancel", () => cancelDrag(), { once: true });
    onDragState({ from });
  }

  function dragMove(event) {
    if (!drag) return;
    drag.moved ||= Math.hypot(event.clientX - drag.origin[0], event.clientY - drag.origin[1]) >= 3;
    const end = toStage(event);
    drag.path.setAttribute("d", `M${drag.start.x},${drag.start.y} L${end.x},${end.y}`);
    markTarget(nodeUnder(event));
  }

  function dragEnd(event) {
    event.target.removeEventListener("pointermove", dragMove);
    if (!drag) return; // cancelled with Esc
    const { from, target } = drag;
    cancelDrag();
    const to = target?.dataset.operator;
    if (to && to !== from) connect(from, to);
  }

  function cancelDrag() {
    if (!drag) return false;
    draggedLast = drag.moved;
    drag.path.remove();
    drag.target?.classList.remove("drop-ok", "drop-refused");
    graph.nodes[drag.from]?.classList.remove("connect-source");
    drag = null;
    onDragState(null);
    return true;
  }

  // ---- panning and zooming -----------------------------------------------------------------

  container.addEventListener("pointerdown", (event) => {
    if (event.button !== 0 || event.target.closest(".node, .edge-hit")) return;
    pan = { x: event.clientX, y: event.clientY, moved: false };
    container.setPointerCapture(event.pointerId);
    container.classList.add("panning");
  });
  container.addEventListener("pointermove", (event) => {
    if (!pan) return;
    const dx = event.clientX - pan.x, dy = event.clientY - pan.y;
    if (!pan.moved && Math.hypot(dx, dy) < 3) return;
    pan.moved = true;
    pan.x = event.clientX;
    pan.y = event.clientY;
    panBy(dx, dy);
  });
  const endPan = () => { pan = null; container.classList.remove("panning"); };
  container.addEventListener("pointerup", endPan);
  container.addEventListener("pointercancel", endPan);
  container.addEventListener("wheel", (event) => {
    event.preventDefault();
    const box = container.getBoundingClientRect();
    zoomAt(Math.exp(-event.deltaY * 0.0015), event.clientX - box.left, event.clientY - box.top);
  }, { passive: false });
  $("zoom-in").addEventListener("click", () => zoomAt(1.25));
  $("zoom-out").addEventListener("click", () => zoomAt(0.8));
  $("zoom-fit").addEventListener("click", fit);

  return { attach, startDrag, cancelDrag, zoomIn: () => zoomAt(1.25), zoomOut: () => zoomAt(0.8), fit,
    panBy, dragging: () => drag !== null,
    clickedAfterDrag: () => { const was = draggedLast; draggedLast = false; return was; } };
}
