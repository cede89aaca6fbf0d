// #/fleet : agents, TPU VMs and what the provider did, and the queue with the reason each run waits.
import { h, clear, badge, fmtAgo, fmtTime, singleFlight, toast, DASH } from "./util.js";
import * as api from "./api.js";

export function mount(root, route, app) {
  let fleet = null, error = null;
  const ctl = new AbortController();
  app.setCrumbs(Object.assign([], { title: "Fleet" }));
  const body = h("div.stack");
  root.append(body);

  const refetch = singleFlight(async () => {
    try {
      fleet = await api.get("/api/fleet", { signal: ctl.signal });
      error = null;
    } catch (e) {
      if (e.name === "AbortError") return;
      error = e;
    }
    render();
  });

  async function drain(agent, on) {
    try {
      await api.post(`/api/agents/${encodeURIComponent(agent.id)}/drain`, { drain: on });
      toast(`${agent.id}: ${on ? "draining (no new runs; running ones finish)" : "accepting runs again"}`, "ok");
    } catch (e) { toast(`${on ? "drain" : "undrain"} ${agent.id}: ${e.message}`, "error"); }
    refetch();
  }
  async function cancelRun(r) {
    if (!confirm(`Cancel r${r.id} (${r.variant}, seed ${r.seed}) of e${r.experiment}?`)) return;
    try {
      await api.post(`/api/runs/${r.id}/cancel`);
      toast(`r${r.id}: cancelled`, "ok");
    } catch (e) { toast(`cancel r${r.id}: ${e.message}`, "error"); }
    refetch();
  }

  const panel = (title, count, content) => h("div.panel",
    h("div.panel-head", h("h2", title), count != null ? h("span.muted", String(count)) : null), content);

  function slots(a) {
    const n = Math.max(0, a.slots || 0), busy = Math.min(n, a.busy_slots || 0);
    return h("span.progress-cell",
      n <= 16 ? h("span.slots", Array.from({ length: n }, (_, i) => h("span" + (i < busy ? ".busy" : "")))) :
        h("div.pbar", { style: { width: "80px" } }, h("span.seg.st-running", { style: { width: `${(100 * busy) / n}%` } })),
      h("span.num.muted", `${busy}/${n}`));
  }

  function agentsPanel(now) {
    const agents = fleet.agents || [];
    if (!agents.length) return panel("Agents", 0, h("div.state-msg", "No agent has connected. Start one with ", h("code", "taectl up --agents 1"), "."));
    return panel("Agents", agents.length, h("div.tbl-wrap", h("table.tbl",
      h("thead", h("tr", h("th", "agent"), h("th", "host"), h("th", "state"), h("th", "slots"), h("th", "labels"),
        h("th.num", "last heartbeat"), h("th", "version"), h("th", "runs"), h("th", ""))),
      h("tbody", agents.map((a) => {
        const stale = a.last_seen && now - a.last_seen > 30;
        const quarantined = !!a.quarantine;
        const draining = a.state === "draining" || quarantined;
        const gone = a.state === "gone" || a.state === "lost";
        return h("tr",
          h("td.mono", a.id), h("td.mono", a.host || ""),
          h("td", quarantined ? h("span", { title: a.quarantine }, badge("quarantined"), " ", h("span.muted.small", a.quarantine)) : badge(a.state)),
          h("td", slots(a)),
          h("td", Object.entries(a.labels || {}).map(([k, v]) => h("span.chip", h("b", k + "="), v))),
          h("td.num" + (stale && !gone ? ".bad" : ""), { title: fmtTime(a.last_seen), dataset: { ago: a.last_seen ?? "", hb: a.id } }, fmtAgo(a.last_seen, now)),
          h("td.mono.muted", a.version || ""),
          h("td", (a.runs || []).map((r) => [h("a.mono", { href: `#/r/${r}` }, `r${r}`), " "])),
          h("td", { style: { textAlign: "right" } }, gone ? null : h("button.btn.small", {
            onclick: () => drain(a, !draining),
            title: quarantined ? "Lift the quarantine: let it take runs again" : draining ? "Let it take new runs again" : "Take no new runs; the running ones finish",
          }, draining ? "Undrain" : "Drain")));
      })))));
  }

  // taed's shapes: VMs {provider, pool, name, zone, state, detail}; events {time, provider, subject, event, detail}.
  function vmsPanel() {
    const vms = fleet.vms || [];
    return panel("TPU VMs and slices", vms.length, vms.length === 0 ? h("div.state-msg", "No VMs: no provider pool is configured, or it is scaled to zero.") :
      h("div.tbl-wrap", h("table.tbl.compact",
        h("thead", h("tr", h("th", "name"), h("th", "provider"), h("th", "pool"), h("th", "zone / namespace"), h("th", "state"), h("th", "why"))),
        h("tbody", vms.map((v) => h("tr", h("td.mono.nowrap", v.name), h("td.mono", v.provider || ""),
          h("td.mono", v.pool || ""), h("td.mono.muted", v.zone || ""), h("td", badge(v.state)), h("td.wrap", v.detail || "")))))));
  }

  function eventsPanel(now) {
    const all = fleet.provider_events || [];
    const evs = [...all].sort((a, b) => (b.time || 0) - (a.time || 0)).slice(0, 100);
    return panel("Provider events", all.length, evs.length === 0 ? h("div.state-msg", "Nothing yet.") :
      h("div.tbl-wrap", { style: { maxHeight: "320px", overflowY: "auto" } }, h("table.tbl.compact",
        h("thead", h("tr", h("th.num", "at"), h("th", "provider"), h("th", "agent / VM"), h("th", "event"), h("th", "detail"))),
        h("tbody", evs.map((e) => h("tr",
          h("td.num", { title: fmtTime(e.time), dataset: { ago: e.time ?? "" } }, fmtAgo(e.time, now)),
          h("td.mono.nowrap", e.provider || ""), h("td.mono.nowrap", e.subject || ""),
          h("td", h("span.chip", e.event || "")), h("td.wrap", e.detail || "")))))));
  }

  function queuePanel(now) {
    const qs = fleet.queue || [];
    return panel("Queue", qs.length, qs.length === 0 ? h("div.state-msg", "Nothing waits.") :
      h("div.tbl-wrap", h("table.tbl.compact",
        h("thead", h("tr", h("th.num", "run"), h("th", "experiment"), h("th", "variant"), h("th.num", "seed"), h("th", "state"),
          h("th", "waits because"), h("th.num", "queued"), h("th", ""))),
        h("tbody", qs.map((r) => h("tr",
          h("td.num", h("a", { href: `#/r/${r.id}` }, `r${r.id}`)),
          h("td", h("a", { href: `#/e/${r.experiment}` }, `e${r.experiment}`)),
          h("td.vname", r.variant), h("td.num", r.seed ?? ""), h("td", badge(r.state)),
          h("td.wrap", r.reason || h("span.faint", DASH)),
          h("td.num", { title: fmtTime(r.created_at), dataset: { ago: r.created_at ?? "" } }, fmtAgo(r.created_at, now)),
          h("td", { style: { textAlign: "right" } }, h("button.btn.small.danger", { onclick: () => cancelRun(r) }, "Cancel"))))))));
  }

  // Each panel is rebuilt only when its content changed (heartbeat times are updated in place),
  // so a live update never swaps a button under the pointer.
  const sigs = {};
  const slots_ = { banner: h("div"), agents: h("div"), queue: h("div"), vms: h("div"), events: h("div") };
  function put(key, sig, build) {
    if (sigs[key] === sig) return;
    sigs[key] = sig;
    clear(slots_[key]).append(...[].concat(build()).filter(Boolean));
  }
  let built = false;
  function render() {
    if (!fleet) {
      built = false;
      clear(body).append(error ? h("div.state-msg.error", error.message, h("button.btn", { onclick: () => refetch() }, "Retry")) : h("div.state-msg", "Loading the fleet…"));
      return;
    }
    if (!built) {
      built = true;
      for (const k of Object.keys(sigs)) delete sigs[k];
      clear(body).append(slots_.banner, slots_.agents, slots_.queue, h("div.fleet-grid.two", slots_.vms, slots_.events));
    }
    const now = Date.now() / 1000;
    const agentsSig = (fleet.agents || []).map((a) => ({ ...a, last_seen: undefined, stale: a.last_seen && now - a.last_seen > 30 }));
    put("banner", error ? error.message : "", () => (error ? h("div.banner.error", `${error.message}: showing the last answer`) : null));
    put("agents", JSON.stringify(agentsSig), () => agentsPanel(now));
    for (const a of fleet.agents || []) {
      const cell = slots_.agents.querySelector(`[data-hb="${CSS.escape(a.id)}"]`);
      if (cell) { cell.dataset.ago = a.last_seen ?? ""; cell.title = fmtTime(a.last_seen); cell.textContent = fmtAgo(a.last_seen, now); }
    }
    put("queue", JSON.stringify(fleet.queue || []), () => queuePanel(now));
    put("vms", JSON.stringify(fleet.vms || []), vmsPanel);
    put("events", JSON.stringify(fleet.provider_events || []), () => eventsPanel(now));
  }

  // "3 s ago" keeps counting between answers.
  const ticker = setInterval(() => {
    const now = Date.now() / 1000;
    body.querySelectorAll("[data-ago]").forEach((el) => {
      const t = Number(el.dataset.ago);
      if (el.dataset.ago !== "" && Number.isFinite(t)) el.textContent = fmtAgo(t, now);
    });
  }, 1000);

  const events = api.stream(() => "/api/events", { changed: () => refetch(), reopen: () => refetch() });
  render();
  refetch();

  return {
    update() { return true; },
    unmount() { events.close(); refetch.stop(); ctl.abort(); clearInterval(ticker); },
    keys: {},
  };
}
