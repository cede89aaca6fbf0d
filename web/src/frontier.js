// #/e/<id>/frontier?bar=eval/acc>=0.99&cost=params|flops|tokens_per_s&view=tuned|grid
// The cost frontier (server/report/frontier.h, what `taectl report --frontier` prints): each
// variant's cost and mean ± 95% CI, cheapest first, where its CI sits against the bar, the
// Pareto front, and the cheapest variant whose whole CI clears the bar; the same figure as
// `taectl plot --frontier` from /frontier.svg.
import { h, clear, isNum, DASH, fmtMetric, fmtSI, hashFor, queryString } from "./util.js";
import * as api from "./api.js";
import { experimentHeader } from "./exphead.js";

const COSTS = { params: "params", flops: "FLOPs/token", tokens_per_s: "tokens/s" };
const CLEARS = {
  yes: "clears", mean_only: "mean only (CI straddles)", no_ci: "mean only (1 seed, no CI)",
  no: "no", no_value: "no value", failed_seeds: "no (failed seeds)",
};

export function mount(root, route, app) {
  const ref = route.parts[1];
  const apiBase = `/api/experiments/${encodeURIComponent(ref)}`;
  const hashBase = `/e/${encodeURIComponent(ref)}`;
  let q = route.q;
  let exp = null, report = null, error = null;
  const ctl = new AbortController();

  const headSlot = h("div"), formSlot = h("div.toolbar"), verdictSlot = h("div.frontier-verdict");
  const tableSlot = h("div.panel"), figureSlot = h("div.panel.frontier-figure");
  root.append(headSlot, formSlot, verdictSlot, tableSlot, figureSlot, h("div.hint",
    "A variant clears the bar when its whole 95% CI is on the passing side; a mean that clears with a CI " +
    "across the bar does not count. On the front: no variant of known cost is as cheap and as good, and " +
    "better in one. tokens/s: higher is faster, so cheaper."));
  const tableLink = h("a.btn", { title: "The ablation table" }, "Table");
  const head = experimentHeader({ refresh: () => load(), extra: [tableLink] });
  headSlot.append(head);

  const barInput = h("input.frontier-bar", {
    type: "text", value: q.bar || "", placeholder: "eval/acc>=0.99", "aria-label": "Bar",
    title: "METRIC OP VALUE, OP one of >=, >, <=, <",
  });
  const costSelect = h("select.frontier-cost", { "aria-label": "Cost" },
    Object.entries(COSTS).map(([k, v]) => h("option", { value: k, selected: (q.cost || "params") === k }, v)));
  const viewSelect = h("select.frontier-view", { "aria-label": "View" },
    [["", "auto"], ["tuned", "tuned"], ["grid", "every grid point"]].map(([k, v]) =>
      h("option", { value: k, selected: (q.view || "") === k }, v)));
  const apply = () => app.setQuery({ bar: barInput.value.trim() || null, cost: costSelect.value,
    view: viewSelect.value || null }, { push: true });
  barInput.addEventListener("keydown", (e) => { if (e.key === "Enter") apply(); });
  formSlot.append(h("label", "bar ", barInput), h("label", "cost ", costSelect),
    h("label", "view ", viewSelect), h("button.btn.frontier-go", { onclick: apply }, "Show"));

  function params() {
    return { frontier: q.bar, cost: q.cost || undefined, view: q.view || undefined };
  }

  async function load() {
    try {
      exp = await api.get(apiBase, { signal: ctl.signal });
      report = q.bar ? await api.get(`${apiBase}/report?${queryString(params())}`, { signal: ctl.signal }) : null;
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
      { label: exp ? `e${exp.id} ${exp.name}` : ref, href: `#${hashBase}` }, { label: "frontier" }]);
    tableLink.href = `#${hashBase}`;
    if (exp) head.update(exp);
    clear(verdictSlot); clear(tableSlot); clear(figureSlot);
    if (error) { verdictSlot.append(h("div.error", error.message)); return; }
    if (!q.bar) { verdictSlot.append(h("div.muted", "Name a bar, e.g. eval/acc>=0.99, and press Show.")); return; }
    const f = report?.frontier;
    if (!f) return;
    const costLabel = COSTS[f.cost.axis] || f.cost.axis;
    const bar = `${f.bar.metric} ${f.bar.op} ${f.bar.value}`;
    const which = f.cost.cheaper === "lower" ? "cheapest" : "fastest";
    verdictSlot.append(f.cheapest
      ? h("div.frontier-cheapest", `${which} that clears ${bar}: `, h("b", f.cheapest.variant),
        ` (${costLabel} ${fmtSI(f.cheapest.cost)}; ${f.bar.metric} ${fmtMetric(f.cheapest.mean)} ± ${fmtMetric(f.cheapest.ci95)})`)
      : h("div.frontier-none", f.estimates === "optimistic"
        ? `no cheapest named: the estimates are optimistic (each point chosen on the seeds it shows)`
        : `none clears ${bar} with its whole 95% CI`));
    // what the estimates are, and how the cheapest was chosen
    verdictSlot.append(h("div.muted.frontier-estimates", { "data-estimates": f.estimates || "" },
      `estimates: ${f.estimates || "as run"}. `,
      "The cheapest is found stepping down from the most expensive variant and stopping at the first that does not clear, " +
      "so the chance of naming one that does not clear is at most 2.5% however many variants there are."));
    if (report.view === "tuned") {
      verdictSlot.append(h("div.muted", `each variant at its best grid point on ${report.search?.metric} (${report.search?.goal})`));
    }
    const unknown = f.points.filter((p) => !isNum(p.cost)).map((p) => p.variant);
    if (unknown.length) verdictSlot.append(h("div.muted.frontier-unknown", `cost unknown: ${unknown.join(", ")}`));
    tableSlot.append(h("table.frontier-table",
      h("thead", h("tr", h("th", "variant"), h("th.num", costLabel), h("th.num", `${f.bar.metric} ± 95% CI`),
        h("th.num", "95% CI"), h("th", "bar"), h("th", { title: "on the Pareto front" }, "front"))),
      h("tbody", f.points.map((p) => h(`tr${p.variant === f.cheapest?.variant ? ".cheapest" : ""}`,
        { "data-variant": p.variant },
        h("td.mono", p.variant),
        h("td.num", isNum(p.cost) ? fmtSI(p.cost) : "unknown"),
        h("td.num", isNum(p.mean) ? `${fmtMetric(p.mean)}${isNum(p.ci95) ? ` ± ${fmtMetric(p.ci95)}` : ""}` : DASH),
        h("td.num", isNum(p.lo) ? `[${fmtMetric(p.lo)}, ${fmtMetric(p.hi)}]` : DASH),
        h(`td.clears-${p.clears}`, { title: p.reached ? "tested in the step-down" : "not tested: the step-down stopped at a more expensive variant" },
          CLEARS[p.clears] || p.clears, p.reached ? "" : h("span.faint", " (untested)")),
        h("td", p.on_front ? "★" : ""))))));
    figureSlot.append(h("img.frontier-svg", { alt: `${f.bar.metric} against ${costLabel}`,
      src: `${apiBase}/frontier.svg?${queryString(params())}` }),
    h("a.btn", { href: `${apiBase}/frontier.svg?${queryString({ ...params(), download: 1 })}` }, "Download SVG"));
  }

  load();
  return {
    update(r) {
      const old = q;
      q = r.q;
      if (old.bar !== q.bar || old.cost !== q.cost || old.view !== q.view) load();
      return true;
    },
    unmount() { ctl.abort(); },
    keys: {},
    hashFor: (p) => hashFor(`${hashBase}/frontier`, p),
  };
}
