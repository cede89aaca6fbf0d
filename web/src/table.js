// #/e/<id>?baseline=&metrics=a,b&sort=effect|spec&pivot=<key>&runs=0|1&view=tuned|grid
// The ablation table: per variant the mean ± 95% CI over seeds of each metric, the delta
// against its baseline coloured by the metric's goal, the t-test mark, size and speed. A [grid]
// experiment has two views: tuned (each variant at its own best grid point; taed's default when
// the file has a [search]) and grid (every point against the baseline at the same point).
import {
  h, clear, isNum, DASH, fmtMetric, fmtSigned, fmtPct, fmtSI, fmtAgo, fmtTime, fmtDuration,
  badge, singleFlight, shq, hashFor,
} from "./util.js";
import * as api from "./api.js";
import { experimentHeader, copyCommand } from "./exphead.js";

// Slots re-render only when what they show changed: live updates then never close an open
// <select> or reset the scroll of a part that did not change.
function patch(slot, sig, build) {
  if (slot._sig === sig) return;
  slot._sig = sig;
  clear(slot);
  const n = build();
  if (n) slot.append(n);
}

export function varyingKeys(report) {
  const vary = report.varying || {};
  const variants = new Set([...Object.keys(vary), ...(report.rows || []).map((r) => r.variant)]);
  const keys = [];
  for (const v of Object.values(vary)) for (const k of Object.keys(v || {})) if (!keys.includes(k)) keys.push(k);
  return keys.filter((k) => new Set([...variants].map((v) => JSON.stringify(vary[v]?.[k] ?? null))).size > 1);
}

const fmtVal = (v) => (v == null ? DASH : typeof v === "object" ? JSON.stringify(v) : String(v));

export function judge(goal, delta) {
  if (!isNum(delta) || delta === 0 || (goal !== "min" && goal !== "max")) return "";
  return (goal === "min") === delta < 0 ? "good" : "bad";
}

function goalArrow(goal) {
  if (goal === "min") return h("span.goal", { title: "lower is better" }, "↓");
  if (goal === "max") return h("span.goal", { title: "higher is better" }, "↑");
  return null;
}

// "95%" for 0.05, "99.5%" for 0.005: the confidence of an interval at two-sided level `level`.
function fmtLevel(level) {
  return isNum(level) ? `${+(100 * (1 - level)).toPrecision(4)}%` : "";
}

// The verdict of one compared cell, in words: the decision, why there is none, or what an
// undecided comparison could have detected.
export function verdictOf(s) {
  if (s.decision === "different") return `different ${s.mark || ""}`.trim();
  if (s.decision === "equivalent") return `equivalent within ±${s.margin} (n=${s.decision_n})`;
  if (s.decision === "undecided") {
    // as taectl prints it: "undecided (n=3, held: r12 failed; detects |Δ|≥0.041)"
    const head = [`n=${s.decision_n}`];
    if (s.decision_futile) head.push("futile");
    if (s.decision_held) head.push(`held: ${s.decision_held}`);
    const why = s.note ? `; ${s.note}` : isNum(s.detectable) ? `; detects |Δ|≥${fmtMetric(s.detectable)}` : "";
    return `undecided (${head.join(", ")}${why})`;
  }
  if (s.note) return `no verdict (${s.note})`;
  return "";
}

export function mount(root, route, app) {
  const ref = route.parts[1];  // 12, e12 or the experiment's name: taed resolves it
  const apiBase = `/api/experiments/${encodeURIComponent(ref)}`;
  const hashBase = `/e/${encodeURIComponent(ref)}`;
  const label = () => (exp ? `e${exp.id}` : /^\d+$/.test(ref) ? `e${ref}` : ref);
  let q = route.q;
  let exp = null, report = null, metricList = null, runs = null;
  const RUNS_PAGE = 200;
  let runsWanted = RUNS_PAGE, runsTotal = 0;
  let error = null, fatal = null;
  let selV = null;      // the selected variant (kept by name: sorting moves rows)
  let menuOpen = false;
  const ctl = new AbortController();

  const headSlot = h("div"), toolSlot = h("div"), bannerSlot = h("div"), tableSlot = h("div.panel"), runsSlot = h("div");
  root.append(headSlot, toolSlot, bannerSlot, tableSlot, h("div.hint",
    "Click a row (or a pivot cell) for its curves against its baseline. ", h("kbd", "j"), h("kbd", "k"), " select, ",
    h("kbd", "Enter"), " curves, ", h("kbd", "b"), " make baseline, ", h("kbd", "g"), " pivot."), runsSlot);

  const curvesLink = h("a.btn", { title: "Curves of every variant" }, "Curves");
  const frontierLink = h("a.btn.frontier-link", { title: "The cheapest variant that clears a bar, and the cost frontier" },
    "Frontier");
  const scaleLink = h("a.btn.scale-link", { title: "A [scale] ladder: each effect across model sizes and the fitted law", hidden: true },
    "Scale");
  const head = experimentHeader({ refresh: () => refetch(), extra: [curvesLink, frontierLink, scaleLink] });
  const runsOpen = () => (q.runs ? q.runs === "1" : (exp?.counts?.total ?? 0) <= 100);

  function crumbs() {
    app.setCrumbs([{ label: "Experiments", href: "#/" },
      { label: exp ? `${label()} ${exp.name}` : label(), title: exp ? `${label()} ${exp.name}` : label() }]);
  }
  crumbs();

  function reportUrl() {
    const p = new URLSearchParams();
    if (q.baseline) p.set("baseline", q.baseline);
    if (q.metrics) p.set("metrics", q.metrics);
    if (q.sort) p.set("sort", q.sort);
    if (q.view) p.set("view", q.view);
    return `${apiBase}/report?${p}`;
  }

  const refetch = singleFlight(async () => {
    try {
      const want = [
        api.get(`${apiBase}`, { signal: ctl.signal }),
        api.get(reportUrl(), { signal: ctl.signal }),
        api.get(`${apiBase}/metrics`, { signal: ctl.signal }).catch(() => null),
      ];
      const [e, r, m] = await Promise.all(want);
      exp = e; report = r; if (m) metricList = m;
      if (runsOpen()) {
        // The first page at once; "show more" widens it (a 10,000-run study is not read whole).
        const page = await api.get(`${apiBase}/runs?limit=${runsWanted}`, { signal: ctl.signal });
        runs = page.runs || [];
        runsTotal = page.total ?? runs.length;
      }
      error = null;
    } catch (e) {
      if (e.name === "AbortError") return;
      if (e.status === 404) { fatal = e; events.close(); }
      error = e;
    }
    render();
  });

  function metricsShown() { return report?.metrics || []; }

  function curvesHref(row) {
    const vs = row.variant === row.baseline || !row.baseline ? [row.variant] : [row.variant, row.baseline];
    return hashFor(`${hashBase}/curves`, { metric: metricsShown()[0], variants: vs.join(","), baseline: row.baseline || undefined });
  }

  function command() {
    const parts = ["taectl", "report", shq(label())];
    if (q.baseline) parts.push("--baseline", shq(q.baseline));
    for (const m of metricsShown()) parts.push("--metric", shq(m));
    if (q.sort === "spec") parts.push("--sort", "spec");
    if (q.view === "tuned") parts.push("--tuned");
    if (q.view === "grid") parts.push("--at-grid");
    if (q.pivot) parts.push("--pivot", shq(`variant×${q.pivot}`));
    return parts.join(" ");
  }

  // ---- toolbar ----
  function toolbar() {
    const all = metricList?.metrics || [];
    const shown = metricsShown();
    const setMetrics = (list) => app.setQuery({ metrics: list.join(",") }, { push: true });
    const menu = h("div.menu", { hidden: !menuOpen, style: { maxHeight: "60vh", overflowY: "auto" } },
      all.length === 0 ? h("div.muted", { style: { padding: "6px 10px" } }, "no metrics yet") : null,
      all.map((m) => h("label.ctl", { style: { display: "flex", padding: "3px 10px" } },
        h("input", {
          type: "checkbox", checked: shown.includes(m),
          onchange: (ev) => setMetrics(ev.target.checked ? [...shown, m] : shown.filter((x) => x !== m)),
        }), h("span.mono", m))),
      h("div", { style: { borderTop: "1px solid var(--border2)", marginTop: "4px", paddingTop: "4px" } },
        h("a", { href: "#", onclick: (ev) => { ev.preventDefault(); menuOpen = false; app.setQuery({ metrics: null }, { push: true }); } },
          "Default metrics", h("span.muted", metricList?.default?.join(", ") || ""))));
    const menuBtn = h("button.btn", {
      onclick: () => { menuOpen = !menuOpen; render(); toolSlot.querySelector(".menu-wrap .btn")?.focus(); },
      title: "Metrics in the table; the first one is the pivot's and the curves'",
    }, `Metrics: ${shown.length ? shown.join(", ") : "none"} ▾`);

    const variants = exp?.variants || (report?.rows || []).map((r) => r.variant);
    const baseSel = h("select", {
      "aria-label": "Baseline",
      onchange: (ev) => app.setQuery({ baseline: ev.target.value || null }, { push: true }),
    }, h("option", { value: "" }, `default (${report?.baseline ?? "baseline"})`),
    variants.map((v) => h("option", { value: v, selected: q.baseline === v }, v)));

    const sort = q.sort === "spec" ? "spec" : "effect";
    const keys = report ? varyingKeys(report) : [];
    const pivotSel = h("select", {
      "aria-label": "Pivot", disabled: keys.length === 0,
      onchange: (ev) => app.setQuery({ pivot: ev.target.value || null }, { push: true }),
    }, h("option", { value: "" }, keys.length ? "off" : "no varying keys"),
    keys.map((k) => h("option", { value: k, selected: q.pivot === k }, `variant × ${k}`)));

    return h("div.toolbar",
      h("div.menu-wrap", menuBtn, menu),
      h("label.ctl", "baseline", baseSel),
      h("span.grp",
        h("button.btn" + (sort === "effect" ? ".on" : ""), { onclick: () => app.setQuery({ sort: null }, { push: true }), title: "Baselines first, then by effect size of the first metric" }, "by effect"),
        h("button.btn" + (sort === "spec" ? ".on" : ""), { onclick: () => app.setQuery({ sort: "spec" }, { push: true }), title: "In the spec's order" }, "spec order")),
      hasGrid() ? h("span.grp.view-toggle",
        h("button.btn" + (report?.view === "tuned" ? ".on" : ""), { dataset: { view: "tuned" }, onclick: () => app.setQuery({ view: "tuned" }, { push: true }), title: `Each variant at its own best grid point${report?.search ? ` on ${report.search.metric}` : ""}` }, "tuned"),
        h("button.btn" + (report?.view === "grid" ? ".on" : ""), { dataset: { view: "grid" }, onclick: () => app.setQuery({ view: "grid" }, { push: true }), title: "Every grid point, against the baseline at the same point" }, "per point")) : null,
      h("label.ctl", "pivot", pivotSel),
      h("button.btn", { onclick: () => copyCommand(command()), title: command() }, "Copy as taectl command"));
  }

  const hasGrid = () => (exp?.variants || []).some((v) => v.includes("["));

  // What an asha [search] saved: its steps against the full grid's, and the points pruned per rung.
  function savingsLine() {
    const s = exp?.search_savings;
    if (!s) return null;
    const pct = isNum(s.fraction) ? `${Math.round(100 * s.fraction)}% of the full grid's steps` : "no run with train.steps";
    const rungs = (s.rungs || []).map((g) => h("span.rung", { dataset: { rung: g.rung }, title: `rung ${g.rung} at step ${g.step}: ${g.pruned} of ${g.judged} judged points pruned${g.nodata ? `, ${g.nodata} without data` : ""}` },
      `rung ${g.rung} (step ${g.step}): ${g.pruned} of ${g.judged} pruned`));
    return h("div.savings", { title: "each run's last step over its train.steps" },
      h("b", "search "), h("span.savings-steps", pct), h("span.muted", ` (${s.steps_run} of ${s.steps_full} steps)`),
      rungs.length ? [h("span.muted", " · "), ...rungs.flatMap((r, i) => (i ? [h("span.muted", ", "), r] : [r]))] : h("span.muted", " · no rung judged yet"));
  }

  // The rung view of an asha [search]: per competing group, the search metric of each point at
  // each rung (the mean over its seeds), the rung's verdict marked: pruned there (struck, with its
  // rank), kept, or no data. Points that went furthest come first.
  function rungView() {
    const decisions = report.decisions || [];
    if (!decisions.length) return null;
    const metric = report.search?.metric ?? "";
    const groups = new Map();
    for (const d of decisions) {
      if (!groups.has(d.group)) groups.set(d.group, { steps: new Map(), points: new Map() });
      const g = groups.get(d.group);
      g.steps.set(d.rung, d.step);
      if (!g.points.has(d.point)) g.points.set(d.point, new Map());
      g.points.get(d.point).set(d.rung, d);
    }
    const tables = [];
    for (const [group, g] of groups) {
      const rungs = [...g.steps.keys()].sort((a, b) => a - b);
      const last = (cells) => Math.max(...cells.keys());
      const points = [...g.points.entries()].sort(([, a], [, b]) => {
        const la = last(a), lb = last(b);
        if (la !== lb) return lb - la;
        const va = a.get(la).value, vb = b.get(lb).value;
        return (va ?? Infinity) - (vb ?? Infinity);
      });
      tables.push(h("table.tbl.rung-table", { dataset: { group } },
        h("thead", h("tr", h("th", groups.size > 1 ? group : "point"),
          ...rungs.map((r) => h("th.num", { title: `rung ${r}` }, `step ${g.steps.get(r)}`)))),
        h("tbody", points.map(([point, cells]) => h("tr", { dataset: { point } },
          h("td.mono", point),
          ...rungs.map((r) => {
            const d = cells.get(r);
            if (!d) return h("td.num.faint", "");
            // A worst value (a seed diverged or failed; +-inf, which JSON carries as null) says
            // which; a rung still waiting for its bootstrap shows the value it recorded.
            const worst = /: \S+ (diverged|failed) at step/.exec(d.reason || "");
            const text = worst ? worst[1] : d.value === null ? DASH : fmtMetric(d.value);
            const title = d.reason || `${d.verdict} at rung ${d.rung} (step ${d.step}): ${metric} ${text}, ${d.rank} of ${d.competitors}, keeps best ${d.keeps}`;
            return h(`td.num.rung-${d.verdict}`, { title, dataset: { verdict: d.verdict } },
              text, d.verdict === "prune" ? h("span.rung-mark", ` ✕ ${d.rank}/${d.competitors}`) : null);
          }))))));
    }
    return h("details.panel.rungs", { open: true },
      h("summary", "Rungs ", h("span.muted", `${metric}: mean over seeds at each rung; ✕ pruned there (rank/points judged)`)),
      ...tables);
  }

  // ---- the table ----
  // What the table's verdicts control, in words (report.correction, taed's FamilySummary).
  function familyText() {
    const c = report.correction;
    if (!c) return "";
    return c.family || "";
  }

  function ablationTable() {
    const rows = report.rows || [];
    const metrics = metricsShown();
    const goal = report.goal || {};
    const keys = varyingKeys(report);
    const vary = report.varying || {};
    const tuned = report.view === "tuned";

    const grp = h("tr.grp",
      h("th", { rowspan: 2 }, "variant"),
      tuned ? h("th", { rowspan: 2, title: `the grid point chosen on ${report.search?.metric ?? "the first metric"} (${report.search?.goal === "max" ? "highest" : "lowest"} mean over seeds)` }, "best point") : null,
      tuned ? h("th.num", { rowspan: 2, title: "points with a score / all points of the variant (pruned, failed and unfinished points have none)" }, "points") : null,
      keys.map((k) => h("th.keyh", { rowspan: 2, title: k }, h("span.mono", k.replaceAll(".", ".\u200b")))),
      h("th.num", { rowspan: 2, title: "succeeded runs / all runs" }, "runs"),
      metrics.map((m) => h("th.mgrp", { colspan: 4 }, h("span.mono", m), goalArrow(goal[m]))),
      h("th.num.mstart", { rowspan: 2 }, "params"), h("th.num", { rowspan: 2 }, "FLOPs/tok"), h("th.num", { rowspan: 2 }, "tok/s"));
    const sub = h("tr", metrics.map(() => [
      h("th.num.mstart", { title: "mean ± half-width of the 95% confidence interval over seeds (n runs)" }, "mean ± 95% CI"),
      h("th.num", { title: "mean of each run's best value" }, "best"),
      h("th.num", { title: "mean − baseline mean [its interval, at the level that agrees with the verdict] (relative to the baseline mean where the baseline is clearly away from zero)" }, "Δ [CI]"),
      h("th", { title: familyText() }, "verdict")]));

    const tb = h("tbody");
    rows.forEach((r, i) => {
      const isBase = !r.baseline || r.variant === r.baseline;
      const tr = h("tr.link" + (r.variant === selV ? ".sel" : "") + (isBase ? ".is-base" : ""), {
        onclick: () => app.go(curvesHref(r)), title: `Curves of ${r.variant}${isBase ? "" : ` against ${r.baseline}`}`,
      },
      h("td.nowrap", h("span.vname", tuned ? r.ablation : r.variant), isBase ? h("span.chip-base", "base") : null),
      tuned ? h("td.mono.point", { dataset: { point: r.point_name || "" } }, r.point_name || h("span.faint", DASH)) : null,
      tuned ? h("td.num", { title: `${r.points - r.candidates} of ${r.points} points without a score` }, `${r.candidates}/${r.points}`) : null,
      keys.map((k) => h("td.cfg", fmtVal(vary[r.variant]?.[k]))),
      h("td.num", h("span" + (r.runs < r.runs_total ? ".muted" : ""), `${r.runs ?? 0}/${r.runs_total ?? 0}`),
        r.runs_pruned ? h("span.chip-pruned", { title: `${r.runs_pruned} run(s) stopped early by the asha [search]` }, "pruned") : null,
        r.runs_failed ? h("span.chip-pruned", { title: `${r.runs_failed} run(s) failed; their seeds are not replaced, and a comparison whose next look needs one is held` }, `${r.runs_failed} failed`) : null),
      metrics.map((m) => {
        const s = r.metrics?.[m] || {};
        const cls = judge(goal[m], s.delta);
        const sig = s.mark || "";
        return [
          h("td.num.mstart", {
            // the raw numbers, for tests and for anyone scripting the page
            dataset: { variant: r.variant, metric: m, mean: s.mean ?? "", ci95: s.ci95 ?? "", n: s.n ?? "", delta: s.delta ?? "" },
          }, isNum(s.mean)
            ? [fmtMetric(s.mean), h("span.pm", " ± "), fmtMetric(s.ci95), h("span.n", { title: "runs with this metric" }, `n=${s.n ?? 0}`),
              // at chance, at a task's shortcut or at a [report] floor (docs/tasks.md)
              s.level ? h("span.level", { title: `${s.level.what} (${fmtMetric(s.level.value)})` }, s.level.kind) : null]
            : h("span.faint", DASH)),
          h("td.num", fmtMetric(s.best)),
          h("td.num.delta", {
            dataset: { deltaLo: s.delta_ci95?.[0] ?? "", deltaHi: s.delta_ci95?.[1] ?? "" },
          }, isBase || !isNum(s.delta) ? "" :
            // every compared cell shows its delta with its interval, decided or not
            h("span" + (cls ? "." + cls : ""), { style: s.decision === "different" ? null : { opacity: 0.75 } }, fmtSigned(s.delta),
              Array.isArray(s.delta_ci95) ? h("span.ci", { title: `${fmtLevel(s.delta_level)} interval of Δ` }, ` [${fmtSigned(s.delta_ci95[0])}, ${fmtSigned(s.delta_ci95[1])}]`) : null,
              h("span.pct", isNum(s.rel_delta) ? `(${fmtPct(s.rel_delta)})` : ""))),
          h("td.sig.verdict", { title: isNum(s.p_value) ? `p = ${s.p_value.toPrecision(3)}${isNum(s.p_adjusted) ? `, ${report.correction?.method ?? "holm"}-adjusted ${s.p_adjusted.toPrecision(3)}` : ""}` : "" },
            isBase ? "" : verdictOf(s)),
        ];
      }),
      h("td.num.mstart", fmtSI(r.params)), h("td.num", fmtSI(r.flops_per_token)), h("td.num", fmtSI(r.tokens_per_s)));
      tb.append(tr);
    });
    return h("div.tbl-wrap", h("table.tbl.ablation", h("thead", grp, sub), tb));
  }

  function pivotTable() {
    const key = q.pivot;
    const rows = report.rows || [];
    const metric = metricsShown()[0];
    const goal = report.goal?.[metric];
    const vary = report.varying || {};
    const others = varyingKeys(report).filter((k) => k !== key);
    const colVals = [], rowKeys = [], cells = new Map();
    for (const r of rows) {
      const cv = fmtVal(vary[r.variant]?.[key]);
      const rk = JSON.stringify(others.map((k) => fmtVal(vary[r.variant]?.[k])));
      if (!colVals.includes(cv)) colVals.push(cv);
      if (!rowKeys.includes(rk)) rowKeys.push(rk);
      if (!cells.has(rk + "\u0000" + cv)) cells.set(rk + "\u0000" + cv, r);
    }
    const cmp = (a, b) => (a !== DASH && b !== DASH && !isNaN(Number(a)) && !isNaN(Number(b)) ? Number(a) - Number(b) : a.localeCompare(b));
    colVals.sort(cmp);
    rowKeys.sort((x, y) => {
      const a = JSON.parse(x), b = JSON.parse(y);
      for (let i = 0; i < a.length; i++) { const c = cmp(a[i], b[i]); if (c) return c; }
      return 0;
    });
    const tb = h("tbody");
    for (const rk of rowKeys) {
      const vals = JSON.parse(rk);
      const rs = colVals.map((cv) => cells.get(rk + "\u0000" + cv));
      const means = rs.map((r) => r?.metrics?.[metric]?.mean).filter(isNum);
      const best = means.length > 1 && (goal === "min" || goal === "max") ? (goal === "min" ? Math.min(...means) : Math.max(...means)) : null;
      tb.append(h("tr",
        others.length ? vals.map((v) => h("td.rowkey", v)) : h("td.rowkey.muted", "all"),
        rs.map((r, ci) => {
          if (!r) return h("td.cell.faint", { class: ci === 0 ? "mstart" : "" }, DASH);
          const s = r.metrics?.[metric] || {};
          return h("td.cell.num" + (ci === 0 ? ".mstart" : "") + (isNum(best) && s.mean === best ? ".best-cell" : ""), {
            title: `${r.variant}: click for its curves`, style: { cursor: "pointer" }, onclick: () => app.go(curvesHref(r)),
          }, isNum(s.mean) ? [fmtMetric(s.mean), h("span.pm", " ± "), fmtMetric(s.ci95), h("span.n", `n=${s.n ?? 0}`)] : h("span.faint", DASH));
        })));
    }
    return h("div.tbl-wrap", h("table.tbl.pivot",
      h("thead",
        h("tr.grp", others.length ? others.map((k) => h("th", { rowspan: 2 }, h("span.mono", k))) : h("th", { rowspan: 2 }, ""),
          h("th.mgrp", { colspan: colVals.length }, h("span.mono", metric), goalArrow(goal), h("span.muted", " by "), h("span.mono", key))),
        h("tr", colVals.map((v, i) => h("th.num" + (i === 0 ? ".mstart" : ""), h("span.mono", v))))),
      tb));
  }

  function runsList() {
    const open = runsOpen();
    const det = h("details.panel.runs-list", { open },
      h("summary", "Runs ", h("span.muted", exp ? `(${exp.counts?.total ?? 0})` : "")));
    det.addEventListener("toggle", () => {
      if (det.open !== open) app.setQuery({ runs: det.open ? "1" : "0" });
    });
    if (!open) return det;
    if (!runs) { det.append(h("div.state-msg", "Loading runs…")); return det; }
    if (runs.length === 0) { det.append(h("div.state-msg", "No runs yet.")); return det; }
    const metrics = metricsShown();
    const now = Date.now() / 1000;
    const sorted = [...runs].sort((a, b) => a.id - b.id);
    det.append(h("div.tbl-wrap", h("table.tbl.compact",
      h("thead", h("tr", h("th.num", "run"), h("th", "variant"), h("th.num", "seed"), h("th", "state"), h("th.num", "attempt"),
        h("th", "agent"), h("th.num", "last step"), metrics.map((m) => h("th.num", h("span.mono", m))),
        h("th.num", "started"), h("th.num", "duration"), h("th", "reason"))),
      h("tbody", sorted.map((r) => h("tr.link", { onclick: (ev) => { if (!ev.target.closest("a")) app.go(`#/r/${r.id}`); } },
        h("td.num", h("a", { href: `#/r/${r.id}` }, `r${r.id}`)),
        h("td.vname", r.variant), h("td.num", { title: r.confirm ? "a confirmation run (search.confirm): a fresh seed at the chosen point" : null }, r.confirm ? `${r.seed} confirm` : r.seed), h("td", badge(r.state)), h("td.num", r.attempt ?? ""),
        h("td.mono", r.agent || ""), h("td.num", r.last_step ?? ""),
        metrics.map((m) => h("td.num", fmtMetric(r.final_metrics?.[m]))),
        h("td.num", { title: fmtTime(r.started_at) }, r.started_at ? fmtAgo(r.started_at, now) : ""),
        h("td.num", r.started_at ? fmtDuration((r.finished_at || now) - r.started_at) : ""),
        h("td.muted.wrap", r.reason || "")))))));
    if (runsTotal > runs.length) {
      const more = Math.min(RUNS_PAGE, runsTotal - runs.length);
      det.append(h("div.state-msg", `${runs.length} of ${runsTotal} runs shown `,
        h("button.btn", { "data-more-runs": "", onclick: () => { runsWanted += RUNS_PAGE; refetch(); } }, `show ${more} more`)));
    }
    return det;
  }

  function render() {
    crumbs();
    if (fatal) {
      clear(headSlot); clear(toolSlot); clear(runsSlot);
      patch(tableSlot, "fatal" + fatal.message, () => h("div.state-msg.error", fatal.status === 404 ? `Experiment ${label()} not found.` : fatal.message));
      return;
    }
    if (!exp || !report) {
      patch(tableSlot, "load" + (error?.message || ""), () => error
        ? h("div.state-msg.error", error.message, h("button.btn", { onclick: () => refetch() }, "Retry"))
        : h("div.state-msg", "Loading the ablation table…"));
      return;
    }
    if (!head.parentNode) headSlot.append(head);
    curvesLink.href = hashFor(`${hashBase}/curves`, { metric: metricsShown()[0], baseline: q.baseline });
    frontierLink.href = hashFor(`${hashBase}/frontier`, {});
    scaleLink.href = hashFor(`${hashBase}/scale`, {});
    scaleLink.hidden = !(report.rows || []).some((r) => /[[,]rung=\d+/.test(r.variant));
    head.update(exp);
    patch(toolSlot, JSON.stringify([q, metricList, exp.variants, report.metrics, report.baseline, report.view, varyingKeys(report), menuOpen]), toolbar);
    patch(bannerSlot, error ? error.message : "", () => error ? h("div.banner.error", `${error.message}: showing the last answer`) : null);
    const rows = report.rows || [];
    const noData = rows.length === 0 || rows.every((r) => !r.runs);
    patch(tableSlot, JSON.stringify([report, selV, q.pivot, exp.search_savings]), () => {
      if (rows.length === 0) return h("div.state-msg", "No runs yet.");
      const parts = [];
      if (report.no_metrics) {
        // runs ran but none reported a metric: how a command job reports, and what one printed
        const nm = report.no_metrics;
        parts.push(h("div.banner.warn.no-metrics", { style: { margin: "8px", whiteSpace: "pre-wrap" } },
          nm.hint,
          nm.sample_output.length
            ? h("div", `The last lines r${nm.sample_run} printed, to write a pattern against:`,
              h("pre.sample-output", nm.sample_output.join("\n")))
            : h("div", `r${nm.sample_run} has printed nothing yet.`)));
      } else if (noData) parts.push(h("div.banner.warn", { style: { margin: "8px" } }, "No run has succeeded yet: the means fill in as runs finish."));
      // a baseline at chance, at a shortcut or at a floor: its deltas cannot show the mechanism
      for (const b of report.banners || []) parts.push(h("div.banner.warn.level-banner", { style: { margin: "8px" } }, b));
      if (report.view === "tuned") {
        parts.push(h("div.view-note.muted", { style: { margin: "8px" } },
          `Each variant at its own best grid point on ${report.search?.metric ?? metricsShown()[0]}; Δ against ${report.rows?.find((r) => r.variant === r.baseline)?.variant ?? "the baseline"} at its own best point.`));
        // what the values are: optimistic (chosen on the same seeds), confirmed or pending
        const est = report.estimates || "";
        const confirm = report.search?.confirm || 0;
        const estText = confirm > 0
          ? (est.startsWith("confirmed")
            ? `Estimates ${est}: each row's runs, mean, CI and Δ come from ${confirm} fresh seeds at its chosen point, not the seeds it was chosen on.`
            : `Confirmation ${est}: each row will show its chosen point's ${confirm} fresh seeds alone, added once the search is over.`)
          : `Estimates ${est || "optimistic: chosen on the same seeds"}: each point was chosen on the seeds whose mean it shows, so the mean and Δ lean toward luck (search.confirm = N re-runs the chosen points on N fresh seeds).`;
        parts.push(h("div.view-note.estimates" + (confirm > 0 && est.startsWith("confirmed") ? ".muted" : ".estimates-warn"), { style: { margin: "8px" } }, estText));
      }
      const saved = savingsLine();
      if (saved) parts.push(saved);
      if (q.pivot && varyingKeys(report).includes(q.pivot)) parts.push(pivotTable());
      else {
        if (q.pivot) parts.push(h("div.banner.warn", { style: { margin: "8px" } }, `${q.pivot} does not vary between the variants: no pivot.`));
        parts.push(ablationTable());
        if (familyText()) parts.push(h("div.view-note.muted.family-note", { style: { margin: "8px" } }, familyText()));
      }
      const rungsPart = rungView();
      if (rungsPart) parts.push(rungsPart);
      return h("div", parts);
    });
    patch(runsSlot, JSON.stringify([runsOpen(), runs, report.metrics, Math.floor(Date.now() / 10000)]), runsList);
  }

  const events = api.stream(() => `${apiBase}/events`, { changed: () => refetch(), reopen: () => refetch() });
  const closeMenu = (ev) => {
    if (menuOpen && !ev.target.closest(".menu-wrap")) { menuOpen = false; render(); }
  };
  document.addEventListener("click", closeMenu);
  render();
  refetch();

  const moveSel = (d) => {
    const rows = report?.rows || [];
    if (!rows.length || q.pivot) return;
    const i = rows.findIndex((r) => r.variant === selV);
    selV = rows[i < 0 ? (d > 0 ? 0 : rows.length - 1) : Math.max(0, Math.min(rows.length - 1, i + d))].variant;
    render();
    tableSlot.querySelector("tr.sel")?.scrollIntoView({ block: "nearest" });
  };
  const selected = () => report?.rows?.find((r) => r.variant === selV) || null;

  return {
    update(r) {
      const old = q;
      q = r.q;
      const refetchNeeded = old.baseline !== q.baseline || old.metrics !== q.metrics || old.sort !== q.sort || old.view !== q.view ||
        (q.runs !== old.runs && runsOpen() && !runs);
      if (old.metrics !== q.metrics || old.baseline !== q.baseline) menuOpen = menuOpen && old.metrics !== q.metrics;
      render();
      if (refetchNeeded) refetch();
      return true;
    },
    unmount() { events.close(); refetch.stop(); ctl.abort(); document.removeEventListener("click", closeMenu); },
    keys: {
      j: () => moveSel(1), k: () => moveSel(-1),
      Enter: () => { const r = selected(); if (r) app.go(curvesHref(r)); },
      c: () => { const r = selected(); if (r) app.go(curvesHref(r)); },
      b: () => {
        const r = selected();
        if (r) app.setQuery({ baseline: r.variant }, { push: true });
      },
      g: () => {
        if (!report) return;
        const keys = varyingKeys(report);
        if (!keys.length) return;
        const i = keys.indexOf(q.pivot);
        app.setQuery({ pivot: i + 1 < keys.length ? keys[i + 1] : null }, { push: true });
      },
      Escape: () => { if (menuOpen) { menuOpen = false; render(); return false; } },
    },
  };
}
