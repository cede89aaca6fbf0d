// #/e/<id>/scale?metric=eval/loss&at=1e9&point=lr=0.01
// A [scale] ladder (server/report/scale.h, what `taectl report --scale` prints): each rung's N,
// each variant's effect at every rung against that rung's baseline, the shared exponent and E,
// each ablation's effective-parameter multiplier with its interval and trend, the effect
// extrapolated to `at`; the figure is taed's /scale.svg (`taectl plot --scale`).
import { h, clear, isNum, DASH, fmtMetric, fmtSI, hashFor, queryString } from "./util.js";
import * as api from "./api.js";
import { experimentHeader } from "./exphead.js";

const est = (e, digits = 3) => {
  if (!e || !isNum(e.value)) return DASH;
  const f = (x) => Number(x).toPrecision(digits);
  return e.ci95 ? `${f(e.value)} [${f(e.ci95[0])}, ${f(e.ci95[1])}]` : f(e.value);
};
const signed = (x) => (isNum(x) ? (x >= 0 ? "+" : "") + fmtMetric(x) : DASH);

export function mount(root, route, app) {
  const ref = route.parts[1];
  const apiBase = `/api/experiments/${encodeURIComponent(ref)}`;
  const hashBase = `/e/${encodeURIComponent(ref)}`;
  let q = route.q;
  let exp = null, report = null, error = null;
  const ctl = new AbortController();

  const headSlot = h("div"), formSlot = h("div.toolbar"), summarySlot = h("div.scale-summary");
  const fitSlot = h("div.panel"), rungSlot = h("div.panel"), figureSlot = h("div.panel.scale-figure");
  root.append(headSlot, formSlot, summarySlot, fitSlot, rungSlot, figureSlot, h("div.hint",
    "L = E + A·(m·N)^-α with α and E shared by every variant: m > 1 means the variant is worth a baseline m " +
    "times its size. Intervals come from a bootstrap over seeds; the trend is the slope of log m against log N, " +
    "Bonferroni over the ablations. An extrapolation beyond 10× the ladder is refused."));
  const tableLink = h("a.btn", { title: "The ablation table" }, "Table");
  const head = experimentHeader({ refresh: () => load(), extra: [tableLink] });
  headSlot.append(head);

  const metricInput = h("input.scale-metric", { type: "text", value: q.metric || "", placeholder: "first metric",
    "aria-label": "Metric", title: "a loss (lower is better); default: the report's first metric" });
  const atInput = h("input.scale-at", { type: "text", value: q.at || "", placeholder: "e.g. 1e9",
    "aria-label": "Extrapolate to N", title: "a size N to extrapolate each effect to (at most 10× beyond the ladder)" });
  const apply = () => app.setQuery({ metric: metricInput.value.trim() || null, at: atInput.value.trim() || null,
    point: q.point || null }, { push: true });
  for (const input of [metricInput, atInput]) input.addEventListener("keydown", (e) => { if (e.key === "Enter") apply(); });
  formSlot.append(h("label", "metric ", metricInput), h("label", "at N ", atInput),
    h("button.btn.scale-go", { onclick: apply }, "Show"));

  function params() {
    return { scale: 1, metrics: q.metric || undefined, at: q.at || undefined };
  }

  async function load() {
    try {
      exp = await api.get(apiBase, { signal: ctl.signal });
      report = await api.get(`${apiBase}/report?${queryString(params())}`, { signal: ctl.signal });
      error = null;
    } catch (e) {
      if (e.name === "AbortError") return;
      error = e;
      report = null;
    }
    render();
  }

  function render() {
    app.setCrumbs([{ label: "Experiments", href: "#/" },
      { label: exp ? `e${exp.id} ${exp.name}` : ref, href: `#${hashBase}` }, { label: "scale" }]);
    tableLink.href = `#${hashBase}`;
    if (exp) head.update(exp);
    clear(summarySlot); clear(fitSlot); clear(rungSlot); clear(figureSlot);
    if (error) { summarySlot.append(h("div.error", error.message)); return; }
    if (!report?.scale) return;
    const fits = Array.isArray(report.scale) ? report.scale : [report.scale];
    const index = Math.max(0, fits.findIndex((f) => (f.point || "") === (q.point || "")));
    const fit = fits[index];
    if (fits.length > 1) {
      summarySlot.append(h("div.scale-points", "grid point: ", ...fits.map((f, i) => h(`a.btn${i === index ? ".active" : ""}`,
        { href: hashFor(`${hashBase}/scale`, { ...q, point: f.point || null }) }, f.point))));
    }
    summarySlot.append(fit.ok
      ? h("div.scale-law", `${fit.metric}: α = `, h("b.scale-exponent", est(fit.exponent)), ",  E = ",
        h("b", est(fit.irreducible)), `  over ${fit.rungs.length} rungs` +
        (fit.intervals ? ` (${fit.draws} bootstrap draws)` : " (one seed per cell: estimates only, no intervals)"))
      : h("div.scale-nofit.error", `no fit: ${fit.why}`));
    for (const w of fit.warnings || []) summarySlot.append(h("div.banner.scale-warning", `warning: ${w}`));
    summarySlot.append(h("div.muted.scale-controls", `controls: ${fit.controls}`));

    const variants = fit.variants || [];
    const atN = fit.at?.params;
    fitSlot.append(h("table.scale-fit",
      h("thead", h("tr", h("th", "variant"), h("th.num", "multiplier m [95% CI]"), h("th", "trend"),
        h("th.num", "slope d log m / d log N"), atN ? h("th.num", `Δ at N = ${fmtSI(atN)}`) : null, h("th", "skipped"))),
      h("tbody", variants.map((v, i) => h("tr", { "data-variant": v.variant },
        h("td.mono", v.variant),
        h("td.num.scale-m", i === 0 ? "1 (baseline)" : est(v.multiplier)),
        h("td.scale-trend", i === 0 ? "" : (v.trend || DASH)),
        h("td.num", i === 0 ? "" : est(v.slope)),
        atN ? h("td.num.scale-at-effect", i === 0 ? `${fit.metric} ${est(fit.at.baseline, 4)}`
          : v.at?.effect ? `${est(v.at.effect, 3)} (${v.at.model})` : h("span.faint", `refused: ${v.at?.refused || ""}`)) : null,
        h("td", v.skipped ? `${v.skipped.runs} runs (~${Number(v.skipped.accelerator_hours).toPrecision(3)} accel-h): ${v.skipped.why}` : ""))))));

    const rungs = fit.rungs || [];
    rungSlot.append(h("table.scale-rungs",
      h("thead", h("tr", h("th", "variant"), ...rungs.map((r) => h("th.num", { title: r.overrides },
        `rung ${r.rung}`, h("br"), h("span.faint", isNum(r.params) ? `N = ${fmtSI(r.params)}` : "N unknown"))))),
      h("tbody", variants.map((v, i) => h("tr", { "data-variant": v.variant },
        h("td.mono", v.variant),
        ...rungs.map((r) => {
          const e = (v.rungs || []).find((x) => x.rung === r.rung);
          if (!e || !e.n) return h("td.num.faint", DASH);
          const mean = `${fmtMetric(e.mean)}${isNum(e.ci95) ? ` ± ${fmtMetric(e.ci95)}` : ""}`;
          if (i === 0) return h("td.num", mean);
          return h("td.num", { title: e.note || "" }, mean, h("br"),
            h("span", `Δ ${signed(e.delta)}${e.delta_ci ? ` [${signed(e.delta_ci[0])}, ${signed(e.delta_ci[1])}]` : ""}`),
            e.decision ? h("span.faint", ` ${e.decision} ${e.mark || ""}`) : null);
        }))))));

    const svgParams = { metrics: q.metric || undefined, at: q.at || undefined, point: fit.point || undefined };
    figureSlot.append(h("img.scale-svg", { alt: `${fit.metric} against N`, src: `${apiBase}/scale.svg?${queryString(svgParams)}` }),
      h("a.btn", { href: `${apiBase}/scale.svg?${queryString({ ...svgParams, download: 1 })}` }, "Download SVG"));
  }

  load();
  return {
    update(r) {
      const old = q;
      q = r.q;
      if (old.metric !== q.metric || old.at !== q.at) load();
      else if (old.point !== q.point) render();
      return true;
    },
    unmount() { ctl.abort(); },
    keys: {},
    hashFor: (p) => hashFor(`${hashBase}/scale`, p),
  };
}
