// #/e/<id>/curves?metric=&x=step|tokens|wall|rel&smooth=&delta=0|1&logx=&logy=&minmax=&variants=a,b&baseline=&zoom=x0,x1
// One uPlot chart: per variant the mean over seeds as a line and the 95% CI as a band, both
// computed (and smoothed, and bucketed to ~2 × the chart's width) by taed. With a zoom, taed
// sends only the points in the zoom's x range (x_min/x_max), bucketed across that range: full
// detail however far in, and the exports carry the same range.
import uPlot from "uplot";
import {
  h, clear, isNum, fmtMetric, fmtShort, fmtTime, fmtDurationShort, singleFlight, shq, hashFor, queryString,
  variantColor, withAlpha, cssVar, debounce, isDark,
} from "./util.js";
import * as api from "./api.js";
import { experimentHeader, copyCommand } from "./exphead.js";
import { axis, X_LABEL, xValues, yValues, nearestIdx, cursorDot, positive } from "./chart.js";

const X_KINDS = ["step", "tokens", "wall", "rel"];
const SMOOTH_STEPS = [0, 0.6, 0.9, 0.99];

export function mount(root, route, app) {
  const ref = route.parts[1];  // 12, e12 or the experiment's name: taed resolves it
  const apiBase = `/api/experiments/${encodeURIComponent(ref)}`;
  const hashBase = `/e/${encodeURIComponent(ref)}`;
  const label = () => (exp ? `e${exp.id}` : /^\d+$/.test(ref) ? `e${ref}` : ref);
  let q = route.q;
  let exp = null, metricList = null, curves = null;
  let error = null, fatal = null, loading = false;
  let u = null, sig = "", fetchedWidth = 0;
  let exportOpen = false;
  let drawn = null;      // the state the chart shows: the URL's, with x, delta and metric of the answer
  const ctl = new AbortController();

  const headSlot = h("div"), toolSlot = h("div"), chipSlot = h("div", { style: { flex: "1" } }), actSlot = h("div.toolbar", { style: { margin: "0" } });
  const host = h("div.chart-host");
  const msg = h("div.chart-msg");
  const legend = h("div.legend");
  const foot = h("div.hint");
  root.append(headSlot, toolSlot, h("div.toolbar", { style: { alignItems: "flex-start" } }, chipSlot, actSlot),
    h("div.panel.chart-panel", host, legend), foot);
  host.append(msg);

  // ---- the view state, from the URL ----
  const st = () => {
    const x = X_KINDS.includes(q.x) ? q.x : "step";
    const delta = q.delta === "1";
    return {
      metric: q.metric || metricList?.default?.[0] || metricList?.metrics?.[0] || "",
      x,
      smooth: Math.min(0.99, Math.max(0, Number(q.smooth) || 0)),
      delta,
      logx: q.logx === "1" && x !== "wall",
      logy: q.logy === "1" && !delta,
      minmax: q.minmax === "1",
      variants: q.variants ? q.variants.split(",").filter(Boolean) : [],
      baseline: q.baseline || "",
      zoom: parseZoom(q.zoom),
    };
  };
  function parseZoom(z) {
    if (!z) return null;
    const [a, b] = z.split(",").map(Number);
    return isNum(a) && isNum(b) && a < b ? [a, b] : null;
  }
  const zoomKey = (z) => (z ? `${z[0]},${z[1]}` : "");

  function crumbs() {
    app.setCrumbs([{ label: "Experiments", href: "#/" },
      { label: exp ? `${label()} ${exp.name}` : label(), href: hashFor(`${hashBase}`, { baseline: q.baseline }) },
      { label: "curves", title: `${label()} curves ${st().metric}` }]);
  }
  crumbs();

  // Same parameters for the JSON we draw, the exports and the copied command.
  function params(width = fetchedWidth || chartWidth()) {
    const s = st();
    return {
      metric: s.metric, x: s.x, width, smooth: s.smooth, delta: s.delta ? 1 : 0,
      baseline: s.baseline || undefined, variants: s.variants.join(",") || undefined,
      x_min: s.zoom?.[0], x_max: s.zoom?.[1],
    };
  }
  const curvesUrl = (p) => `${apiBase}/curves?${queryString(p)}`;

  function chartWidth() { return Math.max(300, Math.floor(host.clientWidth || 900)); }
  function chartHeight() { return Math.max(300, Math.min(620, window.innerHeight - 330)); }

  // ---- fetching ----
  const fetchMeta = async () => {
    const [e, m] = await Promise.all([
      api.get(`${apiBase}`, { signal: ctl.signal }),
      api.get(`${apiBase}/metrics`, { signal: ctl.signal }),
    ]);
    exp = e; metricList = m;
  };
  const refetch = singleFlight(async () => {
    loading = true;
    try {
      if (!exp || !metricList) await fetchMeta();
      else api.get(`${apiBase}`, { signal: ctl.signal }).then((e) => { exp = e; renderHead(); }).catch(() => {});
      if (!st().metric) { curves = null; error = null; render(); return; }
      const width = chartWidth();
      const zoom = st().zoom;
      const c = await api.get(curvesUrl(params(width)), { signal: ctl.signal });
      // The zoom changed while this was on its way: its points are of another range. Ask again
      // (singleFlight runs it once this one has finished) and keep what is drawn meanwhile.
      if (zoomKey(st().zoom) !== zoomKey(zoom)) { refetch(); return; }
      c._zoom = zoom;  // the x range these points are of (null: all of them)
      fetchedWidth = width;
      curves = c;
      error = null;
    } catch (e) {
      if (e.name === "AbortError") return;
      if (e.status === 404 && !exp) { fatal = e; events.close(); }
      error = e;
    } finally { loading = false; }
    render();
  }, 250);

  // ---- header and toolbar ----
  const tableLink = h("a.btn", { title: "The ablation table" }, "Table");
  const head = experimentHeader({ refresh: () => refetch(), extra: [tableLink] });
  function renderHead() {
    crumbs();
    if (!exp) return;
    if (!head.parentNode) headSlot.append(head);
    tableLink.href = hashFor(`${hashBase}`, { baseline: q.baseline });
    head.update(exp);
  }

  function exportLinks() {
    const p = { ...params(), logy: st().logy ? 1 : undefined };
    return [
      ["SVG", `${apiBase}/curves.svg?${queryString(p)}`, "the figure as taectl plot draws it"],
      ["CSV", `${apiBase}/curves.csv?${queryString(p)}`, "x, variant, n, mean, lo, hi, min, max"],
      ["JSON", `${curvesUrl(p)}&download=1`, "exactly what this chart draws"],
    ];
  }

  function plotCommand() {
    const s = st();
    const parts = ["taectl", "plot", shq(label()), "--metric", shq(s.metric)];
    if (s.logy) parts.push("--log-y");
    parts.push("-o", "curves.svg");
    return parts.join(" ");
  }

  function renderTools() {
    const s = st();
    const tsig = JSON.stringify([q, metricList, exp?.variants, exportOpen]);
    if (toolSlot._sig === tsig) return;
    toolSlot._sig = tsig;
    const metrics = metricList?.metrics || [];
    const metricSel = h("select", { "aria-label": "Metric", onchange: (ev) => app.setQuery({ metric: ev.target.value, zoom: null }, { push: true }) },
      metrics.length ? metrics.map((m) => h("option", { value: m, selected: m === s.metric }, m)) : h("option", { value: "" }, "no metrics yet"));
    const xGrp = h("span.grp", X_KINDS.map((k) => h("button.btn" + (k === s.x ? ".on" : ""), {
      onclick: () => app.setQuery({ x: k === "step" ? null : k, zoom: null, logx: k === "wall" ? null : q.logx }, { push: true }),
      title: X_LABEL[k],
    }, k)));
    const sVal = h("span.smooth-val", s.smooth.toFixed(2));
    const slider = h("input", {
      type: "range", min: 0, max: 0.99, step: 0.01, value: s.smooth, "aria-label": "Smoothing", id: "smooth",
      oninput: (ev) => { sVal.textContent = Number(ev.target.value).toFixed(2); },
      onchange: (ev) => app.setQuery({ smooth: Number(ev.target.value) ? ev.target.value : null }),
    });
    const toggle = (key, label, title, disabled = false) => h("button.btn" + (q[key] === "1" && !disabled ? ".on" : ""), {
      onclick: () => app.setQuery({ [key]: q[key] === "1" ? null : "1", ...(key === "logx" ? { zoom: null } : {}) }, { push: true }),
      title, disabled, "aria-pressed": q[key] === "1" ? "true" : "false",
    }, label);
    const variants = exp?.variants || [];
    const baseSel = h("select", { "aria-label": "Baseline", onchange: (ev) => app.setQuery({ baseline: ev.target.value || null }, { push: true }) },
      h("option", { value: "" }, "default"), variants.map((v) => h("option", { value: v, selected: v === s.baseline }, v)));
    const menu = h("div.menu.right", { hidden: !exportOpen },
      exportLinks().map(([label, href, what]) => h("a", { href, download: "" }, label, h("span.muted", what))));
    const exportBtn = h("button.btn", { onclick: () => toggleExport(), title: "Export this view (e)" }, "Export ▾");
    clear(actSlot).append(...[
      s.zoom ? h("button.btn", { onclick: () => resetZoom(), title: "Show the whole x range (z, or double-click the chart)" }, "Reset zoom") : null,
      h("button.btn", { onclick: () => copyCommand(plotCommand()), title: plotCommand() }, "Copy as taectl command"),
      h("div.menu-wrap", exportBtn, menu)].filter(Boolean));
    clear(toolSlot).append(h("div.toolbar",
      h("label.ctl", "metric", metricSel),
      h("span", h("span.seg-lbl", "x"), xGrp),
      h("label.ctl", { title: "Exponential moving average, computed by taed (s)" }, "smooth", slider, sVal),
      h("span.grp",
        toggle("delta", "Δ baseline", "Plot each variant minus its baseline (d)"),
        toggle("minmax", "min/max", "Dashed envelope of the lowest and highest seed"),
        toggle("logx", "log x", s.x === "wall" ? "Not for wall-clock time" : "Logarithmic x axis", s.x === "wall"),
        toggle("logy", "log y", s.delta ? "Not with deltas (they can be negative)" : "Logarithmic y axis", s.delta)),
      h("label.ctl", { title: "The baseline of Δ mode (with a grid: that ablation at each variant's grid point)" }, "baseline", baseSel)));
  }

  function renderChips() {
    const s = st();
    const all = exp?.variants || [];
    const csig = JSON.stringify([all, q.variants]);
    if (chipSlot._sig === csig) return;
    chipSlot._sig = csig;
    const on = new Set(s.variants.length ? s.variants : all);
    const toggleV = (v, solo) => {
      let next = solo ? [v] : on.has(v) ? all.filter((x) => on.has(x) && x !== v) : all.filter((x) => on.has(x) || x === v);
      if (next.length === all.length) next = [];
      app.setQuery({ variants: next.join(",") || null }, { push: true });
    };
    clear(chipSlot).append(h("div.vchips",
      all.map((v, i) => h("span.vchip" + (on.has(v) ? "" : ".off"), {
        title: "Click to show or hide; shift-click to show only this one", role: "button", tabindex: 0,
        onclick: (ev) => toggleV(v, ev.shiftKey),
        onkeydown: (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); toggleV(v, ev.shiftKey); } },
      }, h("span.sw", { style: { background: variantColor(i) } }), v)),
      s.variants.length ? h("button.btn.small.ghost", { onclick: () => app.setQuery({ variants: null }, { push: true }) }, "all") : null));
  }

  function toggleExport(open = !exportOpen) {
    exportOpen = open;
    toolSlot._sig = "";
    renderTools();
    if (open) actSlot.querySelector(".menu a")?.focus();
  }

  // ---- the chart ----
  function colorOf(v) {
    const all = exp?.variants || [];
    const i = all.indexOf(v);
    return variantColor(i >= 0 ? i : all.length + (curves?.variants || []).findIndex((c) => c.variant === v));
  }

  // uPlot's aligned data: [x, per variant: mean, lo, hi, (min, max)].
  function buildData(c, s) {
    let start = 0;
    if (s.logx) { start = c.x.findIndex((v) => v > 0); if (start < 0) start = c.x.length; }
    const cut = (a) => (start ? (a || []).slice(start) : a || []);
    const fix = (a) => (s.logy ? positive(cut(a)) : cut(a));
    const data = [cut(c.x)];
    for (const v of c.variants) {
      data.push(fix(v.mean), fix(v.lo), fix(v.hi));
      if (s.minmax) data.push(fix(v.min), fix(v.max));
    }
    return data;
  }

  const per = () => (st().minmax ? 5 : 3);

  // Where a variant's run count falls below its maximum (a seed stopped or has not got there).
  function nDrops(v, x0) {
    const out = [];
    let prev = null;
    (v.n || []).forEach((n, i) => {
      if (n == null) return;
      if (prev != null && n < prev && n < v.n_max) out.push({ i: i + x0, from: prev, to: n });
      prev = n;
    });
    return out;
  }

  function buildChart(c, data) {
    const s = drawn || st();
    const series = [{}];
    const bands = [];
    const means = new Set();
    c.variants.forEach((v) => {
      const col = colorOf(v.variant);
      const base = series.length;
      means.add(base);
      series.push({ label: v.variant, stroke: col, width: 1.75, spanGaps: true, points: { show: false } });
      series.push({ label: `${v.variant} lo`, stroke: "transparent", width: 0, spanGaps: true, points: { show: false } });
      series.push({ label: `${v.variant} hi`, stroke: "transparent", width: 0, spanGaps: true, points: { show: false } });
      bands.push({ series: [base + 2, base + 1], fill: withAlpha(col, isDark() ? 0.13 : 0.16) });
      if (s.minmax) {
        series.push({ label: `${v.variant} min`, stroke: withAlpha(col, 0.55), width: 1, dash: [4, 3], spanGaps: true, points: { show: false } });
        series.push({ label: `${v.variant} max`, stroke: withAlpha(col, 0.55), width: 1, dash: [4, 3], spanGaps: true, points: { show: false } });
      }
    });
    const drawExtras = (u) => {
      const ctx = u.ctx;
      const { left, top, width, height } = u.bbox;
      const dpr = devicePixelRatio || 1;
      ctx.save();
      if (s.delta) {  // the baseline itself: zero
        const y = u.valToPos(0, "y", true);
        if (y >= top && y <= top + height) {
          ctx.strokeStyle = cssVar("--axis");
          ctx.setLineDash([5 * dpr, 4 * dpr]);
          ctx.lineWidth = dpr;
          ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(left + width, y); ctx.stroke();
          ctx.setLineDash([]);
        }
      }
      // n drops: a small triangle on the x axis in the variant's colour
      c.variants.forEach((v, k) => {
        if (!u.series[1 + k * per()].show) return;
        for (const d of v._drops || []) {
          const xv = u.data[0][d.i];
          if (xv == null) continue;
          const x = u.valToPos(xv, "x", true);
          if (x < left || x > left + width) continue;
          const b = top + height, sz = 5 * dpr;
          ctx.fillStyle = colorOf(v.variant);
          ctx.beginPath(); ctx.moveTo(x, b - sz * 1.6); ctx.lineTo(x - sz, b); ctx.lineTo(x + sz, b); ctx.closePath(); ctx.fill();
          ctx.strokeStyle = withAlpha(colorOf(v.variant), 0.35);
          ctx.setLineDash([2 * dpr, 3 * dpr]);
          ctx.lineWidth = dpr;
          ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, b - sz * 1.6); ctx.stroke();
          ctx.setLineDash([]);
        }
      });
      ctx.restore();
    };
    const opts = {
      width: chartWidth(),
      height: chartHeight(),
      pxAlign: 0,
      legend: { show: false },
      cursor: {
        // A drag selects a range that becomes the URL's zoom (setSelect below); a double-click
        // resets it. uPlot's own zoom would only know the points it has.
        drag: { x: true, y: false, setScale: false },
        bind: { dblclick: () => (ev) => { if (ev.button === 0 && st().zoom) resetZoom(); return null; } },
        dataIdx: nearestIdx,
        points: { show: (u, si) => (means.has(si) ? cursorDot()() : null) },
      },
      focus: { alpha: 1 },
      scales: {
        x: { time: s.x === "wall", distr: s.logx ? 3 : 1 },
        y: { distr: s.logy ? 3 : 1 },
      },
      axes: [
        axis({ label: X_LABEL[s.x], labelSize: 22, ...(s.x === "wall" ? {} : { values: xValues(s.x) }) }),
        axis({ label: s.delta ? `Δ ${s.metric}` : s.metric, labelSize: 22, size: 64, values: yValues() }),
      ],
      series,
      bands,
      hooks: {
        draw: [drawExtras],
        setCursor: [(u) => updateLegend(u)],
        setScale: [(chart, key) => { if (key === "x" && chart === u) markScale(chart); }],
        setSelect: [(chart) => onSelect(chart)],
      },
    };
    return new uPlot(opts, data, host);
  }

  function xLabel(v) {
    const s = drawn || st();
    if (!isNum(v)) return "";
    if (s.x === "wall") return fmtTime(v);
    if (s.x === "rel") return fmtDurationShort(v);
    return `${s.x} ${fmtShort(v)}`;
  }

  let legendItems = [];
  function buildLegend(c) {
    clear(legend);
    legendItems = c.variants.map((v) => {
      const val = h("span.val"), nn = h("span.nn");
      const drops = v._drops || [];
      const dropTxt = drops.length ? `n ${drops[0].from}→${drops[0].to} from ${xLabel(curves.x[drops[0].i])}` : "";
      const item = h("span.item", { title: `${v.variant}${v.baseline && v.baseline !== v.variant ? ` (baseline ${v.baseline})` : ""}: runs ${(v.runs || []).map((r) => "r" + r).join(" ")}` },
        h("span.sw", { style: { background: colorOf(v.variant) } }), h("span.vname", v.variant), val, nn,
        dropTxt ? h("span.drop", dropTxt) : null);
      legend.append(item);
      return { v, val, nn };
    });
    legend.append(legendX);
  }
  const legendX = h("span.xval");

  function updateLegend(u) {
    const s = drawn || st();
    const idx = u?.cursor.idx;
    const P = per();
    legendItems.forEach(({ v, val, nn }, k) => {
      const si = 1 + k * P;
      let i = idx != null ? u.cursor.idxs?.[si] ?? idx : null;
      const mean = u?.data[si] || [];
      if (i == null) {
        // no cursor: the last value in view
        i = u ? Math.min(mean.length - 1, u.valToIdx(u.scales.x.max)) : mean.length - 1;
        while (i >= 0 && mean[i] == null) i--;
      }
      const m = i >= 0 ? mean[i] : null;
      if (!isNum(m)) { val.textContent = "–"; nn.textContent = `n=${v.n_max ?? 0}`; return; }
      const lo = u.data[si + 1][i], hi = u.data[si + 2][i];
      const half = isNum(lo) && isNum(hi) ? (hi - lo) / 2 : null;
      val.textContent = (s.delta && m > 0 ? "+" : "") + fmtMetric(m) + (isNum(half) && half > 0 ? ` ± ${fmtMetric(half)}` : "");
      const off = fetchOffset();
      const n = v.n?.[i + off];
      nn.textContent = n != null && n !== v.n_max ? `n=${n}/${v.n_max}` : `n=${v.n_max ?? 0}`;
    });
    legendX.textContent = idx != null && u ? xLabel(u.data[0][idx]) : "";
  }
  // With log x the leading x <= 0 buckets were cut: data index + offset = response index.
  function fetchOffset() {
    if (!st().logx || !curves) return 0;
    const i = curves.x.findIndex((v) => v > 0);
    return i < 0 ? curves.x.length : i;
  }

  function fullRange(chart) {
    const xs = chart.data[0];
    return xs.length ? [xs[0], xs[xs.length - 1]] : null;
  }
  function roundZoom(a, b) {
    let digits = Math.max(0, Math.min(10, Math.ceil(-Math.log10((b - a) / 10000))));
    while (digits < 12 && a > 0 && !(+a.toFixed(digits) > 0)) digits++;  // log x: keep it positive
    return `${+a.toFixed(digits)},${+b.toFixed(digits)}`;
  }
  // The x range on screen, as data-x-min/-max, and the number of x values drawn as data-x-len,
  // on the chart's element: for tests and for anyone scripting the page.
  function markScale(chart) {
    if (!chart) {
      delete host.dataset.xMin; delete host.dataset.xMax; delete host.dataset.xLen;
      return;
    }
    host.dataset.xMin = chart.scales.x.min;
    host.dataset.xMax = chart.scales.x.max;
    host.dataset.xLen = chart.data[0].length;
  }
  // A drag ended: its range, rounded, becomes the URL's zoom (update() then shows exactly that
  // and fetches its points). Dragging across everything of an unzoomed chart is no zoom.
  function onSelect(chart) {
    const { left, width } = chart.select;
    if (!(width > 0)) return;
    const a = chart.posToVal(left, "x"), b = chart.posToVal(left + width, "x");
    chart.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
    // not from inside uPlot's event handling
    queueMicrotask(() => {
      if (u !== chart || !isNum(a) || !isNum(b) || !(b > a)) return;
      const full = curves && !curves._zoom ? fullRange(chart) : null;
      const z = full && a <= full[0] && b >= full[1] ? null : roundZoom(a, b);
      if ((q.zoom || null) === z) applyZoom();
      else app.setQuery({ zoom: z });
    });
  }
  // Put the chart's x scale on the URL's zoom (or on all the points it has), synchronously.
  function applyZoom() {
    if (!u) return;
    const z = st().zoom || fullRange(u);
    if (z) u.batch(() => u.setScale("x", { min: z[0], max: z[1] }));
    markScale(u);
  }
  function resetZoom() { app.setQuery({ zoom: null }); }

  function destroyChart() {
    if (u) { u.destroy(); u = null; }
    markScale(null);
    sig = "";
  }

  function render() {
    renderHead();
    renderTools();
    renderChips();
    const s = st();
    foot.textContent = "";
    if (fatal) {
      destroyChart();
      msg.textContent = `Experiment ${label()} not found.`;
      msg.className = "chart-msg error";
      clear(legend);
      return;
    }
    msg.className = "chart-msg";
    if (!curves) {
      destroyChart();
      clear(legend);
      msg.textContent = error ? error.message : !s.metric && metricList ? "No metrics yet: the curves appear once runs report." : "Loading curves…";
      if (error) msg.classList.add("error");
      host.style.height = chartHeight() + "px";
      return;
    }
    const c = curves;
    // an answer to an older request may arrive after the URL changed: draw what it is
    const sx = X_KINDS.includes(c.x_kind) ? c.x_kind : s.x;
    const cd = c.delta == null ? s.delta : c.delta === true || c.delta === 1 || c.delta === "1";
    drawn = { ...s, x: sx, delta: cd, metric: c.metric || s.metric,
      logx: q.logx === "1" && sx !== "wall", logy: q.logy === "1" && !cd };
    Object.assign(s, drawn);
    const off = s.logx ? Math.max(0, c.x.findIndex((v) => v > 0)) : 0;
    c.variants.forEach((v) => { v._drops = nDrops(v, 0).map((d) => ({ ...d, i: d.i - off })).filter((d) => d.i >= 0); });
    const data = buildData(c, s);
    const hasPoints = data[0].length > 0 && data.slice(1).some((a) => a.some((v) => v != null));
    const newSig = JSON.stringify([c.variants.map((v) => v.variant), s.minmax, s.logx, s.logy, s.x, s.delta, s.metric, document.documentElement.dataset.effectiveTheme]);
    if (!c.variants.length || !hasPoints) {
      destroyChart();
      clear(legend);
      msg.textContent = !c.variants.length ? "No variant selected." : c._zoom
        ? `No points of ${s.metric} between ${xLabel(c._zoom[0])} and ${xLabel(c._zoom[1])}: reset the zoom (z).`
        : `No points of ${s.metric} yet.`;
      host.style.height = chartHeight() + "px";
      if (c._zoom && c.variants.length) Object.assign(host.dataset, { xMin: c._zoom[0], xMax: c._zoom[1], xLen: 0 });
      return;
    }
    msg.textContent = "";
    host.style.height = "";
    if (u && newSig === sig) {
      // Live update: keep the zoom (setData(data, false), then the zoom's range again); without
      // a zoom, follow the data. In one batch: the scale and data-x-* change together.
      const z = s.zoom;
      u.batch(() => {
        if (z) {
          u.setData(data, false);
          u.setScale("x", { min: z[0], max: z[1] });
        } else u.setData(data);
      });
      buildLegend(c);
    } else {
      destroyChart();
      u = buildChart(c, data);
      sig = newSig;
      buildLegend(c);
      if (s.zoom) applyZoom();
    }
    updateLegend(u);
    markScale(u);
    foot.append(`${c.variants.length} variant${c.variants.length === 1 ? "" : "s"}, ${c.buckets ?? c.x.length} buckets`,
      c._zoom ? ` from ${xLabel(c._zoom[0])} to ${xLabel(c._zoom[1])}` : "",
      c.smooth ? `, smoothed ${c.smooth}` : "", c.delta ? `, minus baseline` : "",
      ". Drag to zoom, double-click to reset. Shaded: 95% CI of the mean over seeds; ▲ on the axis: fewer runs from there on.");
  }

  // ---- live, resize, theme ----
  const events = api.stream(() => `${apiBase}/events`, { changed: () => refetch(), reopen: () => refetch() });
  const refetchForWidth = debounce(() => {
    if (Math.abs(chartWidth() - fetchedWidth) / (fetchedWidth || 1) > 0.2) refetch();
  }, 300);
  const ro = new ResizeObserver(() => {
    if (u) u.setSize({ width: chartWidth(), height: chartHeight() });
    refetchForWidth();
  });
  ro.observe(host);
  const closeMenus = (ev) => { if (exportOpen && !ev.target.closest(".menu-wrap")) toggleExport(false); };
  document.addEventListener("click", closeMenus);

  render();
  refetch();

  return {
    update(r) {
      const old = q;
      q = r.q;
      const changed = (k) => (old[k] || "") !== (q[k] || "");
      const needFetch = ["metric", "x", "smooth", "delta", "variants", "baseline"].some(changed);
      const needRebuild = ["logx", "logy", "minmax"].some(changed);
      const zoomed = changed("zoom");
      // the points drawn are not of the new zoom's range: fetch them
      const otherRange = zoomed && (!curves || zoomKey(st().zoom) !== zoomKey(curves._zoom));
      if (needFetch || otherRange) {
        // keep the old chart until the new answer arrives; a zoom in shows its range at once
        if (zoomed && !needFetch && !needRebuild && st().zoom) applyZoom();
        renderTools();
        renderChips();
        refetch();
      } else if (needRebuild) {
        sig = "";
        render();
      } else if (zoomed) {
        applyZoom();
        renderTools();
      } else render();
      return true;
    },
    unmount() {
      events.close(); refetch.stop(); ctl.abort(); ro.disconnect(); refetchForWidth.cancel();
      document.removeEventListener("click", closeMenus);
      destroyChart();
    },
    onTheme() { sig = ""; chipSlot._sig = ""; render(); },
    keys: {
      s: () => {
        const cur = st().smooth;
        const next = SMOOTH_STEPS.find((v) => v > cur + 1e-9) ?? 0;
        app.setQuery({ smooth: next ? String(next) : null });
      },
      e: () => toggleExport(),
      d: () => app.setQuery({ delta: q.delta === "1" ? null : "1" }, { push: true }),
      x: () => {
        const i = X_KINDS.indexOf(st().x);
        const k = X_KINDS[(i + 1) % X_KINDS.length];
        app.setQuery({ x: k === "step" ? null : k, zoom: null, logx: k === "wall" ? null : q.logx }, { push: true });
      },
      z: () => resetZoom(),
      Escape: () => { if (exportOpen) { toggleExport(false); return false; } },
    },
  };
}
