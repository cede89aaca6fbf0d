// #/r/<id>?tab=overview|logs&charts=a,b&q=&stream=
// One run: its config, state transitions, final metrics, metric series, head importance; or its logs.
import uPlot from "uplot";
import {
  h, clear, isNum, DASH, fmtMetric, fmtShort, fmtTime, fmtAgo, fmtDuration, badge, singleFlight, toast,
  hashFor, cssVar, withAlpha, isDark,
} from "./util.js";
import * as api from "./api.js";
import { experimentAction } from "./exphead.js";
import { axis, yValues, nearestIdx, cursorDot } from "./chart.js";
import { mountLogs } from "./logs.js";

const FINAL = new Set(["succeeded", "failed", "cancelled", "pruned", "lost"]);

// {"model": {"layers": 2}} -> [["model.layers", 2]]
export function flatten(obj, prefix = "", out = []) {
  for (const [k, v] of Object.entries(obj || {})) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length) flatten(v, key, out);
    else out.push([key, v]);
  }
  return out;
}

const fmtAny = (v) => (v == null ? DASH : typeof v === "number" ? (Number.isInteger(v) ? String(v) : fmtShort(v)) : typeof v === "object" ? JSON.stringify(v) : String(v));

export function mount(root, route, app) {
  const id = Number(route.parts[1].replace(/^r/, ""));
  let q = route.q;
  let run = null, exp = null, error = null, fatal = null;
  let events = null, logs = null;
  const charts = new Map();  // metric -> {u, el, data}
  const ctl = new AbortController();

  const headSlot = h("div"), tabsSlot = h("div"), body = h("div");
  root.append(headSlot, tabsSlot, body);
  const tab = () => (q.tab === "logs" ? "logs" : "overview");

  function crumbs() {
    const c = [{ label: "Experiments", href: "#/" }];
    if (run) c.push({ label: exp ? `e${run.experiment} ${exp.name}` : `e${run.experiment}`, href: `#/e/${run.experiment}` });
    c.push({ label: run ? `r${id} ${run.variant} s${run.seed}` : `r${id}` });
    app.setCrumbs(c);
  }
  crumbs();

  const refetch = singleFlight(async () => {
    try {
      run = await api.get(`/api/runs/${id}`, { signal: ctl.signal });
      error = null;
      if (!exp) exp = await api.get(`/api/experiments/${run.experiment}`, { signal: ctl.signal }).catch(() => null);
      if (!events) events = api.stream(() => `/api/experiments/${run.experiment}/events`, { changed: () => refetch(), reopen: () => refetch() });
    } catch (e) {
      if (e.name === "AbortError") return;
      if (e.status === 404) { fatal = e; events?.close(); }
      error = e;
    }
    render();
  }, 1000);

  async function cancelRun() {
    if (!confirm(`Cancel r${id} (${run.variant}, seed ${run.seed})?`)) return;
    try {
      await api.post(`/api/runs/${id}/cancel`);
      toast(`r${id}: cancelled`, "ok");
    } catch (e) { toast(`cancel r${id}: ${e.message}`, "error"); }
    refetch();
  }

  // Rebuilt only when what it shows changed: a live update must not swap a button under the pointer.
  const sigs = {};
  function put(slot, key, sig, build) {
    if (sigs[key] === sig) return;
    sigs[key] = sig;
    clear(slot).append(...[].concat(build()).filter(Boolean));
  }
  const hTitle = h("div.title"), hActions = h("div.actions"), hMeta = h("div.meta"), hBanner = h("div");
  const headEl = h("div.page-head", hTitle, hActions, hMeta);
  function header() {
    const r = run;
    const now = Date.now() / 1000;
    put(hTitle, "t", JSON.stringify([r.variant, r.seed, r.state]), () =>
      [h("h1", h("span.eid", `r${r.id}`), " ", r.variant, h("span.muted", { style: { fontWeight: 400 } }, ` seed ${r.seed}`)), badge(r.state)]);
    put(hActions, "a", JSON.stringify([r.experiment, exp?.name, FINAL.has(r.state)]), () => [
        h("button.btn", { onclick: () => experimentAction({ id: r.experiment, name: exp?.name }, "retry", refetch), title: `Requeue the failed, cancelled and lost runs of e${r.experiment}` }, `Retry e${r.experiment}`),
        h("button.btn.danger", { disabled: FINAL.has(r.state), onclick: cancelRun }, "Cancel run")]);
    put(hMeta, "m", JSON.stringify([r, exp?.name, Math.floor(now / 5)]), () => [
        h("span", "experiment ", h("a", { href: `#/e/${r.experiment}` }, `e${r.experiment}${exp ? " " + exp.name : ""}`)),
        h("span", `attempt ${r.attempt ?? DASH}`),
        r.agent ? h("span", "agent ", h("span.mono", r.agent)) : null,
        r.pid ? h("span", "pid ", h("span.mono", r.pid)) : null,
        r.exit_code != null ? h("span" + (r.exit_code ? ".bad" : ""), `exit ${r.exit_code}`) : null,
        r.last_step != null ? h("span", `step ${r.last_step}`) : null,
        h("span", { title: fmtTime(r.created_at) }, `created ${fmtAgo(r.created_at, now)}`),
        r.started_at ? h("span", { title: fmtTime(r.started_at) }, `started ${fmtAgo(r.started_at, now)}`) : null,
        r.started_at ? h("span", `${r.finished_at ? "took" : "running for"} ${fmtDuration((r.finished_at || now) - r.started_at)}`) : null,
        r.reason ? h("span", r.reason) : null]);
    return headEl;
  }

  function tabs() {
    const t = tab();
    return h("nav.tabs",
      h("a" + (t === "overview" ? ".active" : ""), { href: hashFor(`/r/${id}`, { ...q, tab: null }) }, "Overview"),
      h("a" + (t === "logs" ? ".active" : ""), { href: hashFor(`/r/${id}`, { ...q, tab: "logs" }) }, "Logs"));
  }

  // ---- overview ----
  function summaryKeys() { return (run.summaries || []).map((s) => s.key); }
  function chartMetrics() {
    if (q.charts != null) return q.charts.split(",").filter(Boolean);
    const keys = summaryKeys();
    const main = ["train/loss", "eval/loss"].filter((k) => keys.includes(k));
    return [...main, ...keys.filter((k) => k.startsWith("perf/"))];
  }
  function setCharts(list) { app.setQuery({ charts: list.join(",") }, { push: true }); }

  function metricsPanel() {
    const sums = run.summaries || [];
    const finals = run.final_metrics || {};
    const keys = [...new Set([...sums.map((s) => s.key), ...Object.keys(finals)])].sort();
    if (!keys.length) return h("div.panel", h("div.panel-head", h("h2", "Metrics")), h("div.state-msg", "No metrics reported yet."));
    const byKey = new Map(sums.map((s) => [s.key, s]));
    return h("div.panel", h("div.panel-head", h("h2", "Metrics"), h("span.muted", `${keys.length}`)),
      h("div.tbl-wrap", h("table.tbl.compact",
        h("thead", h("tr", h("th", "metric"), h("th.num", "final"), h("th.num", "last"), h("th.num", "min"), h("th.num", "max"), h("th.num", "last step"), h("th.num", "points"))),
        h("tbody", keys.map((k) => {
          const s = byKey.get(k) || {};
          const shownChart = chartMetrics().includes(k);
          return h("tr.link", { title: shownChart ? "Shown below" : "Click to chart it", onclick: () => { if (!shownChart) setCharts([...chartMetrics(), k]); } },
            h("td.key", k), h("td.num", fmtMetric(finals[k])), h("td.num", fmtMetric(s.last)), h("td.num", fmtMetric(s.min)),
            h("td.num", fmtMetric(s.max)), h("td.num", s.last_step ?? ""), h("td.num", s.count ?? ""));
        })))));
  }

  function transitionsPanel() {
    const ts = run.transitions || [];
    return h("div.panel", h("div.panel-head", h("h2", "State transitions")),
      ts.length === 0 ? h("div.state-msg", "None yet.") :
        h("div.tbl-wrap", h("table.tbl.compact",
          h("thead", h("tr", h("th.num", "attempt"), h("th", "from"), h("th", "to"), h("th", "reason"), h("th.num", "at"))),
          h("tbody", ts.map((t) => h("tr",
            h("td.num", t.attempt ?? ""), h("td", t.from ? badge(t.from) : h("span.faint", DASH)), h("td", badge(t.to)),
            h("td.wrap", t.reason || ""), h("td.num", { title: fmtAgo(t.at) }, fmtTime(t.at))))))));
  }

  // A command job's config without tae-train's keys (they never reach it), unless asked.
  function configPanel() {
    const hidden = new Set(run.hidden_config_keys || []);
    const all = q.allconfig === "1" || hidden.size === 0;
    const isHidden = (k) => [...hidden].some((hk) => k === hk || k.startsWith(hk + "."));
    const pairs = flatten(run.config).filter(([k]) => all || !isHidden(k));
    const panel = kvPanel("Config", pairs, "No config.");
    if (hidden.size > 0) {
      panel.append(h("div.muted.config-hidden", { style: { margin: "8px" } },
        all ? "All keys, tae-train's too. " : `${hidden.size} keys of tae-train never reach this command job. `,
        h("a.config-toggle", { href: hashFor(`/r/${run.id}`, { ...q, allconfig: all ? null : "1" }) }, all ? "Hide them" : "Show them")));
    }
    return panel;
  }

  function kvPanel(title, pairs, empty) {
    return h("div.panel", h("div.panel-head", h("h2", title), h("span.muted", pairs.length ? String(pairs.length) : "")),
      pairs.length === 0 ? h("div.state-msg", empty) :
        h("div.tbl-wrap", h("table.tbl.compact.kv", h("tbody", pairs.map(([k, v]) => h("tr", h("td.key", k), h("td.cfg.wrap", fmtAny(v))))))));
  }

  // ---- head importance ----
  function heatColor(t) {
    // from the panel colour to the accent, in the theme's direction
    const a = isDark() ? [27, 34, 48] : [238, 243, 251];
    const b = isDark() ? [110, 168, 254] : [31, 95, 209];
    const c = a.map((x, i) => Math.round(x + (b[i] - x) * t));
    return `rgb(${c.join(",")})`;
  }
  function heatGrid(title, grid, cells, layers, heads) {
    const vals = (grid || []).flat().filter(isNum);
    const lo = vals.length ? Math.min(...vals) : 0, hi = vals.length ? Math.max(...vals) : 1;
    const span = hi - lo || 1;
    return h("div",
      h("h3", title),
      h("table.heat",
        h("thead", h("tr", h("th", ""), Array.from({ length: heads }, (_, j) => h("th", `h${j}`)))),
        h("tbody", Array.from({ length: layers }, (_, i) => h("tr", h("th", `L${i}`),
          Array.from({ length: heads }, (_, j) => {
            const kind = cells?.[i]?.[j] || "scored";
            const v = grid?.[i]?.[j];
            if (kind !== "scored" || !isNum(v)) return h("td.off", { title: `layer ${i} head ${j}: ${kind !== "scored" ? kind : "missing"}` }, kind !== "scored" ? kind : "missing");
            const t = (v - lo) / span;
            return h("td", {
              style: { background: heatColor(t), color: t > 0.55 ? (isDark() ? "#0e1014" : "#fff") : "var(--fg)" },
              title: `layer ${i} head ${j}: ${v}`,
            }, fmtShort(v));
          }))))),
      h("div.heat-scale", fmtShort(lo), h("span.ramp", { style: { background: `linear-gradient(90deg, ${heatColor(0)}, ${heatColor(1)})` } }), fmtShort(hi)));
  }
  function headsPanel() {
    const hd = run.heads;
    if (!hd) return null;
    return h("div.panel", h("div.panel-head", h("h2", "Head importance"), h("span.muted", `${hd.layers} layers × ${hd.heads} heads`)),
      h("div.panel-body", h("div.heat-wrap",
        heatGrid("eval/loss increase when masked", hd.masked, hd.cells, hd.layers, hd.heads),
        heatGrid("gradient score (normalised per layer)", hd.gradient, hd.cells, hd.layers, hd.heads))));
  }

  // ---- small series charts ----
  function chartsPanel() {
    const list = chartMetrics();
    const others = summaryKeys().filter((k) => !list.includes(k));
    const add = h("select", { "aria-label": "Add a chart", onchange: (ev) => ev.target.value && setCharts([...list, ev.target.value]) },
      h("option", { value: "" }, others.length ? "add a chart…" : "every metric is charted"), others.map((k) => h("option", { value: k }, k)));
    const grid = h("div.grid2");
    for (const m of list) {
      let c = charts.get(m);
      if (!c) {
        const hostEl = h("div", { style: { minHeight: "190px" } }, h("div.state-msg", "Loading…"));
        c = {
          el: h("div.panel.small-chart",
            h("div.chart-title", m, h("button.btn.small.ghost", { title: "Remove this chart", onclick: () => setCharts(list.filter((x) => x !== m)) }, "×")), hostEl),
          host: hostEl, u: null, data: null,
        };
        charts.set(m, c);
      }
      grid.append(c.el);
    }
    for (const [m, c] of charts) if (!list.includes(m)) { c.u?.destroy(); charts.delete(m); }
    return h("div.section",
      h("div.toolbar", { style: { marginTop: "14px" } }, h("h2", "Series"), add,
        q.charts != null ? h("button.btn.small.ghost", { onclick: () => app.setQuery({ charts: null }, { push: true }) }, "default charts") : null),
      list.length ? grid : h("div.state-msg", "No series to chart yet."));
  }

  async function loadSeries() {
    for (const [m, c] of charts) {
      const width = Math.max(300, c.host.clientWidth || 500);
      try {
        const s = await api.get(`/api/runs/${id}/series?metric=${encodeURIComponent(m)}&width=${width}`, { signal: ctl.signal });
        drawSeries(c, s, width);
      } catch (e) {
        if (e.name === "AbortError") return;
        c.u?.destroy(); c.u = null;
        clear(c.host).append(h("div.state-msg.error", e.message));
      }
    }
  }

  function drawSeries(c, s, width) {
    const xs = s.x || [];
    if (!xs.length) {
      c.u?.destroy(); c.u = null;
      clear(c.host).append(h("div.state-msg", `No points of ${s.metric} yet.`));
      return;
    }
    const data = [xs, s.value || [], s.min || [], s.max || []];
    const theme = document.documentElement.dataset.effectiveTheme;
    if (c.u && c.theme === theme) { c.u.setData(data); return; }
    c.u?.destroy();
    clear(c.host);
    c.theme = theme;
    const col = cssVar("--accent");
    c.u = new uPlot({
      width, height: 180, pxAlign: 0, legend: { show: false },
      cursor: { drag: { x: true, y: false }, dataIdx: nearestIdx, points: { show: (u, si) => (si === 1 ? cursorDot(6)() : null) } },
      scales: { x: { time: false } },
      axes: [axis({ values: (u, sp) => sp.map(fmtShort) }), axis({ size: 56, values: yValues() })],
      series: [{},
        { label: s.metric, stroke: col, width: 1.5, spanGaps: true, points: { show: false } },
        { label: "min", stroke: "transparent", spanGaps: true, points: { show: false } },
        { label: "max", stroke: "transparent", spanGaps: true, points: { show: false } }],
      bands: [{ series: [3, 2], fill: withAlpha(toHex(col), 0.18) }],
      hooks: { setCursor: [(u) => {
        const i = u.cursor.idxs?.[1] ?? u.cursor.idx;
        const t = c.el.querySelector(".chart-title");
        let v = t.querySelector(".val");
        if (!v) { v = h("span.val.muted"); t.insertBefore(v, t.lastChild); }
        v.textContent = i != null && u.data[1][i] != null ? `step ${fmtShort(u.data[0][i])}: ${fmtMetric(u.data[1][i])}` : "";
      }] },
    }, data, c.host);
  }
  function toHex(col) {
    if (col.startsWith("#") && col.length === 7) return col;
    return "#1f5fd1";
  }

  // ---- rendering ----
  let overviewSig = "", seriesSig = "";
  const oMetrics = h("div"), oTrans = h("div"), oCharts = h("div"), oHeads = h("div"), oConfig = h("div"), oMeta = h("div");
  function render() {
    crumbs();
    if (fatal) { clear(headSlot); clear(tabsSlot); sigs.tabs = ""; clear(body).append(h("div.state-msg.error", `Run r${id} not found.`)); return; }
    if (!run) {
      clear(body).append(error ? h("div.state-msg.error", error.message, h("button.btn", { onclick: () => refetch() }, "Retry")) : h("div.state-msg", "Loading the run…"));
      return;
    }
    if (!headEl.parentNode) headSlot.append(headEl, hBanner);
    header();
    put(hBanner, "b", error ? error.message : "", () => (error ? h("div.banner.error", `${error.message}: showing the last answer`) : null));
    put(tabsSlot, "tabs", JSON.stringify(q), tabs);
    if (tab() === "logs") {
      for (const c of charts.values()) c.u?.destroy();
      charts.clear();
      overviewSig = ""; seriesSig = "";
      if (!logs) { clear(body); logs = mountLogs(body, run, app, q); }
      return;
    }
    if (logs) { logs.unmount(); logs = null; clear(body); }
    if (!overviewSig) {
      overviewSig = "built";
      for (const k of Object.keys(sigs)) if (k.startsWith("o.")) delete sigs[k];
      clear(body).append(
        h("div.grid2", oMetrics, oTrans), oCharts, oHeads,
        h("div.grid2", { style: { marginTop: "14px" } }, oConfig, oMeta));
    }
    put(oMetrics, "o.metrics", JSON.stringify([run.summaries, run.final_metrics, q.charts]), metricsPanel);
    put(oTrans, "o.trans", JSON.stringify(run.transitions), transitionsPanel);
    put(oCharts, "o.charts", JSON.stringify([q.charts, summaryKeys()]), chartsPanel);
    put(oHeads, "o.heads", JSON.stringify(run.heads), () => (run.heads ? h("div", { style: { marginTop: "14px" } }, headsPanel()) : null));
    put(oConfig, "o.config", JSON.stringify([run.config, run.hidden_config_keys, q.allconfig]), configPanel);
    put(oMeta, "o.meta", JSON.stringify(run.meta), () => kvPanel("Runtime", Object.entries(run.meta || {}), "Not reported yet."));
    const ssig = JSON.stringify([run.last_step, run.state, chartMetrics(), document.documentElement.dataset.effectiveTheme]);
    if (ssig !== seriesSig) { seriesSig = ssig; loadSeries(); }
  }

  render();
  refetch();

  const sub = () => (tab() === "logs" && logs ? logs.keys : {});
  return {
    update(r) {
      const old = q;
      q = r.q;
      if ((old.tab || "") !== (q.tab || "") || (old.charts || "") !== (q.charts || "") ||
          (old.allconfig || "") !== (q.allconfig || "")) render();
      else if (logs) { logs.update(q); put(tabsSlot, "tabs", JSON.stringify(q), tabs); }
      return true;
    },
    unmount() {
      events?.close(); refetch.stop(); ctl.abort(); logs?.unmount();
      for (const c of charts.values()) c.u?.destroy();
    },
    onTheme() { overviewSig = ""; seriesSig = ""; for (const c of charts.values()) c.theme = ""; render(); },
    keys: new Proxy({}, { get: (_, k) => sub()[k], has: (_, k) => k in sub() }),
  };
}
