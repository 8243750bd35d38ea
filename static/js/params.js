// Operator params as form fields: one widget per param kind of the catalog, and the
// conversion between a field's text and the JSON value the DAG document holds.

const MAPPING_KINDS = new Set(["expressions", "aggregates", "schema"]);
const LIST_KINDS = new Set(["columns", "string_list", "stream_names"]);
const PLACEHOLDERS = {
  expressions: "name: expression, one per line",
  aggregates: "name: count(*), one per line",
  schema: "column: type, one per line",
  columns: "column, column",
  string_list: "value, value",
  interval: "e.g. 10 seconds",
  expression: "Spark SQL, e.g. event_type = 'view'",
  redis_url: "redis://host:6379/0 or env:REDIS_URL",
  stream_names: "stream, stream",
  stream_start: "earliest, latest or {\"stream\": \"1700000000000-0\"}",
  nats_url: "nats://host:4222 or env:NATS_URL",
  sequence_start: "earliest, latest or {\"STREAM\": 41}",
};

export function fieldText(kind, value) {
  if (value === undefined || value === null) return "";
  if (MAPPING_KINDS.has(kind) && typeof value === "object") {
    return Object.entries(value).map(([k, v]) => `${k}: ${v}`).join("\n");
  }
  if (LIST_KINDS.has(kind) && Array.isArray(value)) return value.join(", ");
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

// The document value of a field's text; undefined means "leave the param out".
export function fieldValue(kind, text) {
  const raw = text.trim();
  if (raw === "") return undefined;
  if (kind === "positive_int" || kind === "int") return /^-?\d+$/.test(raw) ? Number(raw) : raw;
  if (kind === "non_negative_float") return Number.isFinite(Number(raw)) ? Number(raw) : raw;
  if ((kind === "stream_start" || kind === "sequence_start") && raw.startsWith("{")) {
    try { return JSON.parse(raw); } catch { return raw; }  // the validator names the problem
  }
  if (LIST_KINDS.has(kind)) return raw.split(",").map((s) => s.trim()).filter(Boolean);
  if (MAPPING_KINDS.has(kind)) {
    const mapping = {};
    for (const line of raw.split("\n")) {
      const at = line.indexOf(":");
      if (at > 0) mapping[line.slice(0, at).trim()] = line.slice(at + 1).trim();
    }
    return mapping;
  }
  return raw;
}

// A labelled widget for one param; `onInput(value)` gets the converted value on each edit.
export function paramField(param, value, idPrefix, onInput) {
  const wrap = document.createElement("div");
  wrap.className = "field";
  const id = `${idPrefix}-${param.name}`;
  const label = document.createElement("label");
  label.htmlFor = id;
  label.textContent = param.name;
  if (param.required) {
    // The star is for the eye; the input's `required` is what assistive technology announces
    // (a label naming it too would read "timerequired").
    const req = document.createElement("span");
    req.className = "req";
    req.textContent = " *";
    req.setAttribute("aria-hidden", "true");
    req.title = "required";
    label.append(req);
  }
  let input;
  if (param.kind === "file_format" || param.kind === "stream_payload") {
    input = document.createElement("select");
    const options = param.kind === "file_format" ? ["", "json", "csv", "parquet"] : ["", "fields", "json"];
    for (const option of options) {
      input.add(new Option(option || (param.required ? "choose…" : "default"), option));
    }
  } else if (MAPPING_KINDS.has(param.kind)) {
    input = document.createElement("textarea");
    input.rows = 3;
  } else {
    input = document.createElement("input");
    if (["positive_int", "int", "non_negative_float"].includes(param.kind)) {
      input.type = "number";
      input.step = param.kind === "non_negative_float" ? "any" : "1";
      if (param.kind !== "int") input.min = param.kind === "positive_int" ? "1" : "0";
      if (param.maximum != null) input.max = String(param.maximum);
    }
  }
  input.id = id;
  input.name = param.name;
  input.value = fieldText(param.kind, value);
  input.placeholder = PLACEHOLDERS[param.kind] || (param.default != null ? `default ${fieldText(param.kind, param.default)}` : "");
  if (param.required) input.required = true;
  const hint = document.createElement("div");
  hint.className = "hint";
  hint.id = `${id}-hint`;
  const bound = param.maximum != null ? ` · at most ${Number(param.maximum).toLocaleString("en")}` : "";
  hint.textContent = `${param.kind}${param.default != null ? ` · default ${fieldText(param.kind, param.default)}` : ""}${bound}${param.doc ? ` · ${param.doc}` : ""}`;
  input.setAttribute("aria-describedby", hint.id);
  input.addEventListener(input.tagName === "SELECT" ? "change" : "input",
    () => onInput(fieldValue(param.kind, input.value)));
  wrap.append(label, input, hint);
  return wrap;
}
