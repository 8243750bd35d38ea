// The read-only graph of the version shown on the job page; redrawn when htmx swaps the panel.
import { drawGraph } from "./graph.js";

function draw() {
  const canvas = document.querySelector("[data-job-graph]");
  const source = document.getElementById("version-dag");
  if (!canvas || !source) return;
  const dag = JSON.parse(source.textContent);
  // Text is not shrunk below 90 %: a pipeline too long for the panel is drawn top to bottom.
  drawGraph(canvas, dag, {
    size: { width: 156, height: 50, ranksep: 36, nodesep: 14 }, orient: "auto", minScale: 0.9,
    renderNode: (op, el) => {
      const id = document.createElement("div");
      id.className = "op-id";
      id.textContent = op.parallelism > 1 ? `${op.id} ×${op.parallelism}` : op.id;
      const type = document.createElement("div");
      type.className = "op-type";
      type.textContent = op.type;
      el.append(id, type);
    },
  });
}

document.body.addEventListener("htmx:afterSettle", draw);
draw();
