// Time-series charts on uPlot. Data is kept in full (up to MAX_POINTS) and decimated to about
// two points per pixel before drawing, so an hour of 1-second epochs redraws in a few ms.
// Reconfigurations are drawn as dashed vertical markers on the time axis. Times read in UTC,
// as on the server's pages; an axis states all its ticks in one unit. Colours come from the
// page's theme (static/css/theme.css), light or dark as the system prefers; a chart is drawn
// again in the other theme's colours when that preference changes.
/* global uPlot */

const DARK = matchMedia("(prefers-color-scheme: dark)");

// A colour as given, or, for "--name", the theme's value of that custom property.
export function themeColour(value) {
  if (!value || !value.startsWith("--")) return value;
  return getComputedStyle(document.documentElement).getPropertyValue(value).trim();
}

export const MAX_POINTS = 4 * 3600;

// Buckets of equal size; each bucket keeps its mean time and, per series, the mean or the
// max (`agg[i] === "max"`, so a latency spike stays visible after decimation).
export function decimate(columns, target, agg) {
  const n = columns[0].length;
  if (n <= target) return columns;
  const size = n / target;
  const out = columns.map(() => []);
  for (let b = 0; b < target; b++) {
    const lo = Math.floor(b * size);
    const hi = Math.min(n, Math.floor((b + 1) * size));
    if (hi <= lo) continue;
    for (let c = 0; c < columns.length; c++) {
      let sum = 0, count = 0, max = null;
      for (let i = lo; i < hi; i++) {
        const v = columns[c][i];
        if (v == null) continue;
        sum += v; count += 1;
        if (max === null || v > max) max = v;
      }
      const mode = c === 0 ? "mean" : agg[c - 1];
      out[c].push(count === 0 ? null : mode === "max" ? max : sum / count);
    }
  }
  return out;
}

const MARKER_ROWS = 3;

// Each marker's label goes on the first row where it overlaps no other label; a label with
// no free row is left out (its marker line is still drawn). `chart.markerLabels` keeps the
// boxes drawn, in CSS pixels.
function markerPlugin(chart) {
  return {
    hooks: {
      draw: [(u) => {
        const { ctx, bbox } = u;
        const px = devicePixelRatio;
        ctx.save();
        ctx.strokeStyle = themeColour("--chart-marker");
        ctx.fillStyle = ctx.strokeStyle;
        ctx.lineWidth = 1.5 * px;
        ctx.setLineDash([5 * px, 4 * px]);
        ctx.font = `${11 * px}px system-ui, sans-serif`;
        const rowEnds = new Array(MARKER_ROWS).fill(-Infinity);
        chart.markerLabels = [];
        for (const m of [...chart.markers].sort((a, b) => a.t - b.t)) {
          const x = Math.round(u.valToPos(m.t, "x", true));
          if (x < bbox.left || x > bbox.left + bbox.width) continue;
          ctx.beginPath();
          ctx.moveTo(x, bbox.top);
          ctx.lineTo(x, bbox.top + bbox.height);
          ctx.stroke();
          const left = x + 4 * px;
          const width = ctx.measureText(m.label).width;
          const row = rowEnds.findIndex((end) => end + 6 * px <= left);
          if (row < 0) continue;
          rowEnds[row] = left + width;
          const y = bbox.top + (12 + 13 * row) * px;
          ctx.fillText(m.label, left, y);
          chart.markerLabels.push({ label: m.label, x: left / px, y: y / px, width: width / px });
        }
        ctx.restore();
      }],
    },
  };
}

const two = (n) => String(n).padStart(2, "0");

// hh:mm:ss in UTC (hh:mm when ticks are a minute or more apart).
export function utcClock(t, step = 1) {
  const d = new Date(t * 1000);
  const hm = `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}`;
  return step >= 60 && d.getUTCSeconds() === 0 ? hm : `${hm}:${two(d.getUTCSeconds())}`;
}

// Time ticks fall on whole seconds: no ":54.000" when the data spans a few seconds.
const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600];

// Units an axis may use for a formatter's values, largest first: [from, divisor, suffix].
const AXIS_UNITS = new Map();

// One unit for all of an axis's ticks (chosen by the largest), with the decimals the step
// between ticks needs: "9.5 s, 10.0 s", never "9500 ms, 10.0 s".
export function tickLabels(values, units) {
  const finite = values.filter((v) => Number.isFinite(v));
  const top = Math.max(0, ...finite.map((v) => Math.abs(v)));
  const [, divisor, suffix] = units.find(([from]) => top >= from) || units[units.length - 1];
  const step = finite.length > 1 ? Math.abs(finite[1] - finite[0]) / divisor : 1;
  const decimals = step >= 1 || step === 0 ? 0 : Math.min(3, Math.ceil(-Math.log10(step) - 1e-9));
  return values.map((v) => (Number.isFinite(v) ? `${(v / divisor).toFixed(decimals)}${suffix}` : ""));
}

export class TimeChart {
  // series: [{label, stroke, agg: "mean"|"max", dash?}]
  constructor(element, series, { height = 180, valueFormat = (v) => v } = {}) {
    this.element = element;
    this.series = series;
    this.columns = [[], ...series.map(() => [])];
    this.markers = [];
    this.pending = false;
    this.options = { height, valueFormat };
    this.plot = new uPlot(this.uplotOptions(), this.columns, element);
    this.resized = new ResizeObserver(() => {
      const width = Math.max(element.clientWidth, 300);
      if (Math.abs(width - this.plot.width) > 2) { this.plot.setSize({ width, height }); this.redraw(); }
    });
    this.resized.observe(element);
    this.themed = () => {
      this.plot.destroy();
      this.plot = new uPlot(this.uplotOptions(), this.columns, element);
      this.redraw();
    };
    DARK.addEventListener("change", this.themed);
  }

  destroy() {
    this.destroyed = true;
    this.resized.disconnect();
    DARK.removeEventListener("change", this.themed);
    this.plot.destroy();
  }

  uplotOptions() {
    const { height, valueFormat } = this.options;
    const units = AXIS_UNITS.get(valueFormat);
    const axis = { stroke: themeColour("--chart-axis"), grid: { stroke: themeColour("--chart-grid") },
                   ticks: { stroke: themeColour("--chart-grid") } };
    this.element.dataset.theme = DARK.matches ? "dark" : "light";
    return {
      width: Math.max(this.element.clientWidth, 300),
      height,
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      scales: { x: { time: true } },
      axes: [
        { ...axis, label: "time (UTC)", labelSize: 18, labelFont: "12px system-ui, sans-serif", space: 72,
          incrs: TIME_STEPS, values: (u, splits, axis, space, step) => splits.map((t) => utcClock(t, step)) },
        { ...axis, size: 72, space: 28,
          values: (u, vals) => (units ? tickLabels(vals, units) : vals.map(valueFormat)) },
      ],
      series: [{ label: "Time", value: (u, t) => (t == null ? "—" : `${utcClock(t)} UTC`) }, ...this.series.map((s) => ({ label: s.label, stroke: themeColour(s.stroke), width: 1.5,
        dash: s.dash, spanGaps: true, value: (u, v) => (v == null ? "—" : valueFormat(v)) }))],
      plugins: [markerPlugin(this)],
    };
  }

  // Replaces all points (time in unix seconds, one array per series).
  load(t, values) {
    this.columns = [t.slice(-MAX_POINTS), ...values.map((v) => v.slice(-MAX_POINTS))];
    this.redraw();
  }

  append(t, values) {
    const last = this.columns[0].length ? this.columns[0][this.columns[0].length - 1] : -Infinity;
    if (t <= last) return;
    this.columns[0].push(t);
    values.forEach((v, i) => this.columns[i + 1].push(v));
    if (this.columns[0].length > MAX_POINTS) this.columns.forEach((c) => c.splice(0, c.length - MAX_POINTS));
    this.redraw();
  }

  setMarkers(markers) {
    this.markers = markers;
    this.redraw();
  }

  // At most one redraw per animation frame, however many epochs arrive.
  redraw() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      if (this.destroyed) return;
      const target = Math.max(50, Math.floor(this.plot.width * 2));
      const drawn = decimate(this.columns, target, this.series.map((s) => s.agg || "mean"));
      this.plot.setData(drawn);
      // How many points are held and drawn: for people inspecting the page, and its tests.
      this.element.dataset.points = String(this.columns[0].length);
      this.element.dataset.drawn = String(drawn[0].length);
    });
  }
}

export function formatRate(v) {
  if (v == null || Number.isNaN(v)) return "—";
  const a = Math.abs(v);
  if (a >= 1e6) return `${(v / 1e6).toFixed(2)}M`;
  if (a >= 1e4) return `${(v / 1e3).toFixed(1)}k`;
  if (a >= 100) return v.toFixed(0);
  return v.toFixed(1);
}

export function formatMs(v) {
  if (v == null || Number.isNaN(v)) return "—";
  if (v >= 10000) return `${(v / 1000).toFixed(1)} s`;
  return `${v.toFixed(0)} ms`;
}

// Bytes in decimal units: "512 B", "1.5 KB", "2.0 MB".
export function formatBytes(n) {
  if (n == null) return "—";
  const units = ["B", "KB", "MB", "GB"];
  let value = n;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) { value /= 1000; unit += 1; }
  return `${unit ? value.toFixed(1) : value.toFixed(0)} ${units[unit]}`;
}

AXIS_UNITS.set(formatRate, [[1e6, 1e6, "M"], [1e4, 1e3, "k"], [-Infinity, 1, ""]]);
AXIS_UNITS.set(formatMs, [[10000, 1000, " s"], [-Infinity, 1, " ms"]]);
