// #/?filter=text : every experiment, newest first, live.
import { h, clear, badge, progressBar, doneCount, fmtAgo, fmtTime, singleFlight, debounce } from "./util.js";
import * as api from "./api.js";

export function mount(root, route, app) {
  let list = null;       // experiments from taed, or null before the first answer
  let error = null;
  let sel = -1;          // index into the filtered rows
  let filter = route.q.filter || "";
  const ctl = new AbortController();

  app.setCrumbs(Object.assign([], { title: "Experiments" }));

  const input = h("input", {
    type: "search", placeholder: "Filter: id, name, state, spec path, variant  ( / )",
    value: filter, "aria-label": "Filter experiments", dataset: { enterKey: "1" },
  });
  const count = h("span.muted");
  const body = h("div");
  root.append(
    h("div.toolbar", input, count),
    h("div.panel", body));

  const writeFilter = debounce((v) => app.setQuery({ filter: v }), 150);
  input.addEventListener("input", () => { filter = input.value; sel = filter ? 0 : -1; render(); writeFilter(filter); });

  function matches(e, words) {
    const hay = [`e${e.id}`, String(e.id), e.name, e.description, e.state, e.paused ? "paused" : "",
      e.spec_path, ...(e.variants || [])].join(" ").toLowerCase();
    return words.every((w) => hay.includes(w));
  }

  function rows() {
    if (!list) return [];
    const words = filter.toLowerCase().split(/\s+/).filter(Boolean);
    return list.filter((e) => matches(e, words)).sort((a, b) => b.id - a.id);
  }

  function render() {
    clear(body);
    if (error && !list) {
      body.append(h("div.state-msg.error", error.message,
        h("button.btn", { onclick: () => refetch() }, "Retry")));
      return;
    }
    if (!list) { body.append(h("div.state-msg", "Loading experiments…")); return; }
    if (error) body.append(h("div.banner.error", `${error.message}: showing the last answer`));
    if (list.length === 0) {
      body.append(h("div.state-msg", "No experiments yet. Submit one with ",
        h("code", "taectl submit examples/quickstart.toml"), "."));
      count.textContent = "";
      return;
    }
    const rs = rows();
    count.textContent = filter ? `${rs.length} of ${list.length}` : `${list.length} experiments`;
    if (rs.length === 0) { body.append(h("div.state-msg", `No experiment matches “${filter}”.`)); return; }
    if (sel >= rs.length) sel = rs.length - 1;
    const now = Date.now() / 1000;
    const tb = h("tbody");
    rs.forEach((e, i) => {
      const c = e.counts || {};
      const tr = h("tr.link" + (i === sel ? ".sel" : ""), { onclick: (ev) => { if (!ev.target.closest("a")) app.go(`#/e/${e.id}`); } },
        h("td.num", h("a.eid", { href: `#/e/${e.id}` }, `e${e.id}`)),
        h("td", h("a", { href: `#/e/${e.id}` }, e.name || "(unnamed)"), e.description ? h("span.exp-desc", e.description) : null),
        h("td.nowrap", badge(e.state), " ", e.paused ? h("span.paused-chip", "paused") : null),
        h("td", h("div.progress-cell", progressBar(c))),
        h("td.num", `${doneCount(c)} / ${c.total ?? 0}`),
        h("td.num", c.running ? String(c.running) : ""),
        h("td.num", (c.failed || 0) + (c.lost || 0) ? h("span.bad", String((c.failed || 0) + (c.lost || 0))) : ""),
        h("td.num", (e.variants || []).length || ""),
        h("td.mono.muted", e.spec_path || ""),
        h("td.num", { title: fmtTime(e.created_at) }, fmtAgo(e.created_at, now)));
      tb.append(tr);
    });
    body.append(h("div.tbl-wrap", h("table.tbl",
      h("thead", h("tr",
        h("th.num", "id"), h("th", "name"), h("th", "state"), h("th", "progress"), h("th.num", "done / total"),
        h("th.num", "running"), h("th.num", "failed"), h("th.num", "variants"), h("th", "spec"), h("th.num", "created"))),
      tb)));
    body.querySelector("tr.sel")?.scrollIntoView({ block: "nearest" });
  }

  const refetch = singleFlight(async () => {
    try {
      const r = await api.get("/api/experiments", { signal: ctl.signal });
      list = r.experiments || [];
      error = null;
    } catch (e) {
      if (e.name === "AbortError") return;
      error = e;
    }
    render();
  });

  const events = api.stream(() => "/api/events", { changed: () => refetch(), reopen: () => refetch() });
  render();
  refetch();

  const move = (d) => {
    const n = rows().length;
    if (!n) return;
    sel = sel < 0 ? (d > 0 ? 0 : n - 1) : Math.max(0, Math.min(n - 1, sel + d));
    render();
  };
  const open = () => {
    const rs = rows();
    if (sel >= 0 && rs[sel]) app.go(`#/e/${rs[sel].id}`);
  };

  return {
    update(r) {
      const f = r.q.filter || "";
      if (f !== filter) { filter = f; input.value = f; render(); }
      return true;
    },
    unmount() { events.close(); refetch.stop(); writeFilter.cancel(); ctl.abort(); },
    keys: {
      "/": () => { input.focus(); input.select(); },
      j: () => move(1), k: () => move(-1),
      Enter: () => open(),
    },
  };
}
