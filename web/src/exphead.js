// The header shared by an experiment's table and curves: name, state, progress, actions.
import { h, clear, badge, progressBar, doneCount, fmtAgo, fmtTime, toast, copyText } from "./util.js";
import * as api from "./api.js";

const FINAL = new Set(["succeeded", "failed", "cancelled"]);

export async function experimentAction(exp, action, after) {
  const label = `e${exp.id} ${exp.name || ""}`.trim();
  if (action === "cancel" && !confirm(`Cancel ${label}? Its queued and running runs are stopped.`)) return;
  try {
    await api.post(`/api/experiments/${exp.id}/${action}`);
    const done = { cancel: "cancelled", pause: "paused", resume: "resumed", retry: "retrying its failed, cancelled and lost runs" }[action];
    toast(`${label}: ${done}`, "ok");
  } catch (e) {
    toast(`${action} ${label}: ${e.message}`, "error");
  }
  after?.();
}

// The header element; call header.update(exp) with every new answer. Only the parts whose
// content changed are rebuilt, so a live update never swaps a button under the pointer.
// extra: nodes (links) kept as they are, left of the action buttons.
export function experimentHeader({ refresh, extra = [] }) {
  const title = h("div.title"), prog = h("div.progress-cell"), actions = h("div.actions"), meta = h("div.meta");
  const el = h("div.page-head", title, prog, actions, meta);
  const sigs = {};
  const put = (slot, key, sig, build) => {
    if (sigs[key] === sig) return;
    sigs[key] = sig;
    clear(slot).append(...[].concat(build()).filter(Boolean));
  };
  el.update = (exp) => {
    const c = exp.counts || {};
    const final = FINAL.has(exp.state);
    const act = (a) => () => experimentAction(exp, a, refresh);
    const failedish = (c.failed || 0) + (c.cancelled || 0) + (c.lost || 0);
    put(title, "t", JSON.stringify([exp.id, exp.name, exp.state, exp.paused]), () => [
      h("h1", h("span.eid", `e${exp.id}`), " ", exp.name || "(unnamed)"),
      badge(exp.state), exp.paused ? h("span.paused-chip", "paused") : null]);
    put(prog, "p", JSON.stringify(c), () => [progressBar(c), h("span.num.muted", `${doneCount(c)} / ${c.total ?? 0}`)]);
    put(actions, "a", JSON.stringify([exp.id, final, exp.paused, failedish > 0]), () => [
      ...extra,
      exp.paused
        ? h("button.btn", { disabled: final, onclick: act("resume"), title: "Let its queued runs start" }, "Resume")
        : h("button.btn", { disabled: final, onclick: act("pause"), title: "Keep its queued runs from starting" }, "Pause"),
      h("button.btn", { disabled: !failedish, onclick: act("retry"), title: "Requeue failed, cancelled and lost runs" }, "Retry"),
      h("button.btn.danger", { disabled: final, onclick: act("cancel") }, "Cancel")]);
    put(meta, "m", JSON.stringify([c, exp.spec_path, exp.spec_hash, exp.description, fmtAgo(exp.created_at)]), () => [
      c.running ? h("span", `${c.running} running`) : null,
      c.queued ? h("span", `${c.queued} queued`) : null,
      c.failed ? h("span.bad", `${c.failed} failed`) : null,
      c.lost ? h("span.bad", `${c.lost} lost`) : null,
      c.cancelled ? h("span", `${c.cancelled} cancelled`) : null,
      c.pruned ? h("span", { title: "stopped early by the asha [search]" }, `${c.pruned} pruned`) : null,
      exp.spec_path ? h("span", "spec ", h("span.mono", exp.spec_path)) : null,
      exp.spec_hash ? h("span", { title: exp.spec_hash }, "hash ", h("span.mono", exp.spec_hash.slice(0, 10))) : null,
      h("span", { title: fmtTime(exp.created_at) }, `created ${fmtAgo(exp.created_at)}`),
      exp.description ? h("span", exp.description) : null]);
  };
  return el;
}

export async function copyCommand(cmd) {
  const ok = await copyText(cmd);
  toast(ok ? `Copied: ${cmd}` : `Copy this: ${cmd}`, ok ? "ok" : "info", 6000);
}
