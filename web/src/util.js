// Small helpers shared by the views: DOM building, number and time formatting,
// the URL hash (the whole view state lives there), toasts and the clipboard.

// h("tag.class1.class2", {attr: value, onclick: fn}, child, [children], "text")
export function h(spec, attrs, ...children) {
  const [tag, ...classes] = spec.split(".");
  const node = document.createElement(tag || "div");
  if (classes.length) node.className = classes.join(" ");
  // the second argument is attributes only when it is a plain object; 0 and "" are children
  if (attrs != null && attrs !== false && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className += (node.className ? " " : "") + v;
    else if (k === "style" && typeof v === "object") Object.assign(node.style, v);
    else if (k === "dataset") Object.assign(node.dataset, v);
    else if (k in node && typeof v !== "string") node[k] = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(node, c);
    else node.append(c instanceof Node ? c : String(c));
  }
}

export function clear(node) {
  while (node.firstChild) node.firstChild.remove();
  return node;
}

export const isNum = (v) => typeof v === "number" && Number.isFinite(v);
export const DASH = "–";

// Metric values the way taectl prints them: 4 decimals, tiny or huge ones in e-notation.
export function fmtMetric(v) {
  if (!isNum(v)) return DASH;
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e7)) return v.toExponential(2);
  if (a >= 1e4) return v.toFixed(0);
  if (a >= 1e3) return v.toFixed(1);
  if (a >= 100) return v.toFixed(2);
  return v.toFixed(4);
}

export function fmtSigned(v) {
  if (!isNum(v)) return DASH;
  return (v > 0 ? "+" : v < 0 ? "" : "±") + fmtMetric(v);
}

export function fmtPct(frac) {
  if (!isNum(frac)) return "";
  const p = frac * 100;
  const s = Math.abs(p) >= 1000 ? p.toFixed(0) : p.toFixed(1);
  return (p > 0 ? "+" : "") + s + "%";
}

// 105000 -> "105k", 74400 -> "74.4k", 1.2e9 -> "1.2G".
export function fmtSI(v) {
  if (!isNum(v)) return DASH;
  const a = Math.abs(v);
  const units = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [f, u] of units) {
    if (a >= f) {
      const x = v / f;
      const s = Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2);
      return (s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s) + u;
    }
  }
  if (a === 0) return "0";
  if (a >= 100) return v.toFixed(0);
  if (a >= 1) return String(+v.toPrecision(3));
  return String(+v.toPrecision(3));
}

// Generic short number for axes and tables.
export function fmtShort(v) {
  if (!isNum(v)) return DASH;
  const a = Math.abs(v);
  if (a >= 1e4) return fmtSI(v);
  if (a === 0) return "0";
  if (a < 1e-3) return v.toExponential(1);
  return String(+v.toPrecision(4));
}

const pad = (n, w = 2) => String(n).padStart(w, "0");

export function fmtTime(sec) {
  if (!isNum(sec)) return DASH;
  const d = new Date(sec * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function fmtClock(sec) {
  if (!isNum(sec)) return "";
  const d = new Date(sec * 1000);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

// Seconds as "42 s", "3 min 5 s", "2 h 10 min", "3 d 4 h".
export function fmtDuration(s) {
  if (!isNum(s)) return DASH;
  s = Math.max(0, s);
  if (s < 60) return `${Math.floor(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 >= 1 ? ` ${Math.floor(s % 60)} s` : ""}`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

// Compact duration for axis ticks: 45s, 12m, 1h30m.
export function fmtDurationShort(s) {
  if (!isNum(s)) return "";
  const neg = s < 0 ? "-" : "";
  s = Math.abs(s);
  let out;
  if (s < 60) out = `${+s.toFixed(s < 10 ? 1 : 0)}s`;
  else if (s < 3600) out = `${Math.floor(s / 60)}m${s % 60 >= 1 ? Math.round(s % 60) + "s" : ""}`;
  else if (s < 86400) out = `${Math.floor(s / 3600)}h${Math.round((s % 3600) / 60) ? Math.round((s % 3600) / 60) + "m" : ""}`;
  else out = `${+(s / 86400).toFixed(1)}d`;
  return neg + out;
}

export function fmtAgo(sec, now = Date.now() / 1000) {
  if (!isNum(sec)) return DASH;
  const d = now - sec;
  if (d < 1) return "now";
  if (d < 60) return `${Math.floor(d)} s ago`;
  if (d < 3600) return `${Math.floor(d / 60)} min ago`;
  if (d < 86400) return `${Math.floor(d / 3600)} h ago`;
  return `${Math.floor(d / 86400)} d ago`;
}

// ---- the URL hash ----------------------------------------------------------
// "#/e/12/curves?metric=eval/loss&x=step" -> {path: "/e/12/curves", parts: ["e","12","curves"], q: {...}}
export function parseHash(hash = location.hash) {
  let s = hash.replace(/^#/, "");
  if (!s.startsWith("/")) s = "/" + s;
  const qi = s.indexOf("?");
  const path = qi < 0 ? s : s.slice(0, qi);
  const q = {};
  if (qi >= 0) for (const [k, v] of new URLSearchParams(s.slice(qi + 1))) q[k] = v;
  return { path, parts: path.split("/").filter(Boolean).map(decodeURIComponent), q };
}

// Query strings keep "/" and "," readable: metric=eval/loss&variants=a,b
export function queryString(q) {
  const parts = [];
  for (const [k, v] of Object.entries(q)) {
    if (v == null || v === "") continue;
    const enc = encodeURIComponent(String(v)).replace(/%2F/g, "/").replace(/%2C/g, ",").replace(/%3A/g, ":");
    parts.push(`${encodeURIComponent(k)}=${enc}`);
  }
  return parts.join("&");
}

export function hashFor(path, q = {}) {
  const qs = queryString(q);
  return "#" + path + (qs ? "?" + qs : "");
}

// ---- toasts and clipboard --------------------------------------------------
export function toast(message, kind = "info", ms = kind === "error" ? 8000 : 3500) {
  let box = document.getElementById("toasts");
  if (!box) {
    box = h("div", { id: "toasts", role: "status", "aria-live": "polite" });
    document.body.append(box);
  }
  const t = h("div.toast." + kind, h("span", message),
    h("button.toast-x", { title: "Dismiss", "aria-label": "Dismiss", onclick: () => t.remove() }, "×"));
  box.append(t);
  setTimeout(() => t.remove(), ms);
}

export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch { /* fall back below */ }
  // Plain http on a remote host: no async clipboard, but execCommand still works.
  const ta = h("textarea", { style: { position: "fixed", left: "-9999px", top: "0" } });
  ta.value = text;
  document.body.append(ta);
  ta.select();
  let ok = false;
  try { ok = document.execCommand("copy"); } catch { ok = false; }
  ta.remove();
  return ok;
}

// Shell quoting for the taectl commands we print.
export function shq(s) {
  s = String(s);
  return /^[A-Za-z0-9_.,:/=@%+×-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

export function debounce(fn, ms) {
  let t = 0;
  const d = (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), ms); };
  d.cancel = () => clearTimeout(t);
  return d;
}

// A state name as a coloured badge.
export function badge(state, extra = "") {
  return h("span.badge.st-" + String(state || "unknown").toLowerCase() + (extra ? "." + extra : ""), state || "?");
}

// Experiment/run progress: coloured segments for each final state (pruned by an asha [search]
// included), running and queued.
export function progressBar(counts) {
  const total = counts?.total || 0;
  const segs = [
    ["succeeded", counts?.succeeded], ["failed", counts?.failed], ["lost", counts?.lost],
    ["cancelled", counts?.cancelled], ["pruned", counts?.pruned], ["running", counts?.running],
    ["queued", counts?.queued],
  ];
  const bar = h("div.pbar", { title: segs.filter(([, n]) => n).map(([k, n]) => `${n} ${k}`).join(", ") || "no runs" });
  if (total > 0) {
    for (const [k, n] of segs) {
      if (n) bar.append(h("span.seg.st-" + k, { style: { width: `${(100 * n) / total}%` } }));
    }
  }
  return bar;
}

export function doneCount(c) {
  if (!c) return 0;
  return (c.succeeded || 0) + (c.failed || 0) + (c.cancelled || 0) + (c.pruned || 0) + (c.lost || 0);
}

// Keeps a refetch from running twice at once; a trigger during a fetch runs one more after it.
export function singleFlight(fn, minGapMs = 300) {
  let running = false, again = false, last = 0, timer = 0, stopped = false;
  const run = async () => {
    if (stopped) return;
    if (running) { again = true; return; }
    const wait = last + minGapMs - Date.now();
    if (wait > 0) { clearTimeout(timer); timer = setTimeout(run, wait); return; }
    running = true;
    last = Date.now();
    try { await fn(); } finally {
      running = false;
      if (again && !stopped) { again = false; run(); }
    }
  };
  run.stop = () => { stopped = true; clearTimeout(timer); };
  return run;
}

// Variant colours, stable by the variant's index in the experiment (Tableau 10, tuned per theme).
// After the first ten, a second set of ten (lighter or darker), then the cycle repeats.
const PALETTE_LIGHT = ["#1f77b4", "#e8590c", "#2b8a3e", "#c92a2a", "#7048e8", "#8c564b", "#d6336c", "#495057", "#a6a000", "#1098ad",
  "#74a9cf", "#f5a05a", "#82c91e", "#f08080", "#b197fc", "#c49c94", "#f7a1c4", "#adb5bd", "#d4c94a", "#66d9e8"];
const PALETTE_DARK = ["#4dabf7", "#ff922b", "#69db7c", "#ff6b6b", "#b197fc", "#d8a47f", "#f783ac", "#ced4da", "#e6e04a", "#3bc9db",
  "#1c7ed6", "#d9480f", "#2f9e44", "#e03131", "#7048e8", "#a0785a", "#c2255c", "#868e96", "#a6a000", "#0c8599"];
export function isDark() {
  return document.documentElement.dataset.effectiveTheme === "dark";
}
export function variantColor(i) {
  const p = isDark() ? PALETTE_DARK : PALETTE_LIGHT;
  return p[i % p.length];
}
export function withAlpha(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${a})`;
}
export function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}
