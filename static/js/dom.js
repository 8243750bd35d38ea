// Small DOM helpers shared by the page scripts.

export const $ = (id) => document.getElementById(id);

export const esc = (text) => String(text).replace(/[&<>"']/g,
  (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

// The page carries its CSRF token in the headers htmx sends (see base.html).
export const csrfToken = () =>
  JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";

export function nodeButton(text, label, onClick, cls) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = cls;
  b.textContent = text;
  b.setAttribute("aria-label", label);
  b.title = label;
  b.addEventListener("click", (event) => { event.stopPropagation(); onClick(); });
  return b;
}
