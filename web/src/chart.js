// uPlot plumbing shared by the curves view and the run view's small charts.
import { cssVar, fmtShort, fmtDurationShort, isNum } from "./util.js";

export const FONT = '11px system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", sans-serif';

export function axis(extra = {}) {
  const grid = cssVar("--grid");
  return {
    stroke: cssVar("--axis"),
    font: FONT,
    labelFont: FONT,
    grid: { stroke: grid, width: 1 },
    ticks: { stroke: grid, width: 1, size: 4 },
    ...extra,
  };
}

export const X_LABEL = { step: "step", tokens: "tokens", wall: "wall time", rel: "time since the run started" };

// Tick labels for the x kinds that are not wall-clock times (uPlot formats those itself).
export function xValues(kind) {
  if (kind === "rel") return (u, splits) => splits.map(fmtDurationShort);
  return (u, splits) => splits.map(fmtShort);
}

export function yValues() {
  return (u, splits) => splits.map(fmtShort);
}

// Cursor snapping for sparse series (eval every N steps while the x buckets are finer): the
// nearest bucket where this series has a value, within 64 buckets.
export function nearestIdx(self, si, i) {
  const ys = self.data[si];
  if (!ys || ys[i] != null) return i;
  const xs = self.data[0];
  for (let d = 1; d < 64; d++) {
    const l = i - d, r = i + d;
    const lOk = l >= 0 && ys[l] != null, rOk = r < ys.length && ys[r] != null;
    if (lOk && rOk) return xs[i] - xs[l] <= xs[r] - xs[i] ? l : r;
    if (lOk) return l;
    if (rOk) return r;
  }
  return i;
}

export function cursorDot(size = 7) {
  return () => {
    const d = document.createElement("div");
    d.style.cssText = `width:${size}px;height:${size}px;margin-left:${-size / 2}px;margin-top:${-size / 2}px;border-width:2px`;
    return d;
  };
}

// Replace non-positive values by null (log scales cannot show them).
export function positive(a) {
  return a.map((v) => (isNum(v) && v > 0 ? v : null));
}

export function lastValue(a) {
  for (let i = a.length - 1; i >= 0; i--) if (a[i] != null) return i;
  return -1;
}
