// Time-series charts on uPlot. Data is kept in full (up to MAX_POINTS) and decimated to about
// two points per pixel before drawing, so an hour of 1-second epochs redraws in a few ms.
// Reconfigurations are drawn as dashed vertical markers on the time axis.
/* global uPlot */

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

function markerPlugin(chart) {
  return {
    hooks: {
      draw: [(u) => {
        const { ctx, bbox } = u;
        ctx.save();
        ctx.strokeStyle = "#7c3aed";
        ctx.fillStyle = "#7c3aed";
        ctx.lineWidth = 1.5 * devicePixelRatio;
        ctx.setLineDash([5 * devicePixelRatio, 4 * devicePixelRatio]);
        ctx.font = `${11 * devicePixelRatio}px system-ui, sans-serif`;
        for (const m of chart.markers) {
          const x = Math.round(u.valToPos(m.t, "x", true));
          if (x < bbox.left || x > bbox.left + bbox.width) continue;
          ctx.beginPath();
          ctx.moveTo(x, bbox.top);
          ctx.lineTo(x, bbox.top + bbox.height);
          ctx.stroke();
          ctx.fillText(m.label, x + 4 * devicePixelRatio, bbox.top + 12 * devicePixelRatio);
        }
        ctx.restore();
      }],
    },
  };
}

export class TimeChart {
  // series: [{label, stroke, agg: "mean"|"max", dash?}]
  constructor(element, series, { height = 180, valueFormat = (v) => v } = {}) {
    this.element = element;
    this.series = series;
    this.columns = [[], ...series.map(() => [])];
    this.markers = [];
    this.pending = false;
    const opts = {
      width: Math.max(element.clientWidth, 300),
      height,
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      scales: { x: { time: true } },
      axes: [{}, { size: 72, values: (u, vals) => vals.map(valueFormat) }],
      series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.stroke, width: 1.5,
        dash: s.dash, spanGaps: true, value: (u, v) => (v == null ? "—" : valueFormat(v)) }))],
      plugins: [markerPlugin(this)],
    };
    this.plot = new uPlot(opts, this.columns, element);
    new ResizeObserver(() => {
      const width = Math.max(element.clientWidth, 300);
      if (Math.abs(width - this.plot.width) > 2) { this.plot.setSize({ width, height }); this.redraw(); }
    }).observe(element);
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
