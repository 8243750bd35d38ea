// Figures over a window of epochs. Per epoch, a windowed job's sinks get rows only when a
// window closes, so rates, ETP and latency read 0 or nothing in between; the run page shows
// them over the last N epochs instead: rates and ETP as means, latency p50 as the mean and p99
// as the highest of the epochs that measured one (epochs without rows at a sink have none).

export function meanOf(values) {
  let sum = 0, count = 0;
  for (const v of values) if (v != null && !Number.isNaN(v)) { sum += v; count += 1; }
  return count ? sum / count : null;
}

export function maxOf(values) {
  let max = null;
  for (const v of values) if (v != null && !Number.isNaN(v) && (max === null || v > max)) max = v;
  return max;
}

// The rolling aggregate of a column: point i is `agg` of points i-n+1..i.
export function rolling(values, n, agg = meanOf) {
  const out = new Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = agg(values.slice(Math.max(0, i - n + 1), i + 1));
  return out;
}

// The last `keep` epochs ([epoch, metrics] pairs, oldest first), read over the last `size`.
export class EpochWindow {
  constructor(size, keep) {
    this.size = size;
    this.keep = keep;
    this.items = [];
  }

  add(epoch, metrics) {
    const last = this.items[this.items.length - 1];
    if (last && epoch <= last[0]) return;
    this.items.push([epoch, metrics]);
    if (this.items.length > this.keep) this.items.splice(0, this.items.length - this.keep);
  }

  recent() {
    return this.items.slice(-this.size).map(([, m]) => m);
  }

  // How many epochs the figures are over now (fewer than `size` at a run's start).
  get count() {
    return Math.min(this.size, this.items.length);
  }
}
