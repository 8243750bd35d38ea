// The CSV link follows the filters as htmx swaps the rows.
document.body.addEventListener("htmx:afterSettle", () => {
  const form = document.getElementById("history-filters");
  const link = document.getElementById("csv-link");
  const query = new URLSearchParams(new FormData(form)).toString();
  const base = link.href.split("?")[0];
  link.href = base + (query ? "?" + query : "");
});
