// The read-only graph of the version shown on the job page; redrawn when htmx swaps the panel.
import { drawGraph } from "./graph.js";

function draw() {
  const canvas = document.querySelector("[data-job-graph]");
  const source = document.getElementById("version-dag");
  if (!canvas || !source) return;
  const dag = JSON.parse(source.textContent);
  drawGraph(canvas, dag, {
    size: { width: 150, height: 44, ranksep: 40, nodesep: 14 },
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
