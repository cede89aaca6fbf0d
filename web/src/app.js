// The shell: top bar, hash router, keyboard, theme. Each view module exports
// mount(container, route, app) returning {update(route) -> bool, unmount(), keys, onTheme()}.
import { h, clear, parseHash, hashFor } from "./util.js";
import * as api from "./api.js";
import * as experiments from "./experiments.js";
import * as table from "./table.js";
import * as curves from "./curves.js";
import * as frontier from "./frontier.js";
import * as scale from "./scale.js";
import * as run from "./run.js";
import * as fleet from "./fleet.js";

const main = document.getElementById("main");
const crumbsEl = document.getElementById("crumbs");
let current = null; // {key, view}

// ---- theme -----------------------------------------------------------------
const THEME_KEY = "tae-theme";
const systemDark = matchMedia("(prefers-color-scheme: dark)");
const themeBtn = document.getElementById("theme");

function storedTheme() {
  try { return localStorage.getItem(THEME_KEY); } catch { return null; }
}
function applyTheme() {
  const t = storedTheme();
  const root = document.documentElement;
  if (t === "light" || t === "dark") root.dataset.theme = t;
  else delete root.dataset.theme;
  const eff = t === "light" || t === "dark" ? t : systemDark.matches ? "dark" : "light";
  const changed = root.dataset.effectiveTheme !== eff;
  root.dataset.effectiveTheme = eff;
  themeBtn.textContent = t ? (t === "dark" ? "◐ dark" : "◑ light") : "◒ auto";
  themeBtn.title = `Theme: ${t || "follows the system"} (click to change)`;
  if (changed && current?.view.onTheme) current.view.onTheme();
}
// auto -> the opposite of the system -> the system's own -> auto
themeBtn.addEventListener("click", () => {
  const t = storedTheme();
  const sys = systemDark.matches ? "dark" : "light";
  const other = sys === "dark" ? "light" : "dark";
  const next = !t ? other : t === other ? sys : null;
  try { next ? localStorage.setItem(THEME_KEY, next) : localStorage.removeItem(THEME_KEY); } catch { /* private mode */ }
  applyTheme();
});
systemDark.addEventListener("change", applyTheme);
applyTheme();

// ---- router ----------------------------------------------------------------
function resolve(route) {
  const p = route.parts;
  if (p.length === 0) return { key: "experiments", mod: experiments };
  if (p[0] === "fleet" && p.length === 1) return { key: "fleet", mod: fleet };
  // an experiment by id (12, e12) or by name, as taectl takes it; a run by id (7, r7)
  if (p[0] === "e" && p.length === 2 && p[1]) return { key: "e/" + p[1], mod: table };
  if (p[0] === "e" && p.length === 3 && p[2] === "curves" && p[1]) return { key: "c/" + p[1], mod: curves };
  if (p[0] === "e" && p.length === 3 && p[2] === "frontier" && p[1]) return { key: "f/" + p[1], mod: frontier };
  if (p[0] === "e" && p.length === 3 && p[2] === "scale" && p[1]) return { key: "s/" + p[1], mod: scale };
  if (p[0] === "r" && p.length === 2 && /^r?\d+$/.test(p[1])) return { key: "r/" + p[1], mod: run };
  return null;
}

function route() {
  const r = parseHash();
  const target = resolve(r);
  document.querySelectorAll("#nav a").forEach((a) => {
    const sect = a.dataset.section;
    a.classList.toggle("active", sect === "fleet" ? target?.key === "fleet" : target && target.key !== "fleet");
  });
  if (current && target && current.key === target.key && current.view.update?.(r)) return;
  if (current) {
    try { current.view.unmount?.(); } catch (e) { console.error(e); }
    current = null;
  }
  clear(main);
  closeHelp();
  if (!target) {
    setCrumbs([{ label: "Not found" }]);
    main.append(h("div.state-msg.error", `Nothing lives at ${location.hash}. `, h("a", { href: "#/" }, "Back to the experiments")));
    return;
  }
  const view = target.mod.mount(main, r, app);
  current = { key: target.key, view };
}

// Change the query of the current view. push=true adds a history entry (Back undoes it).
function setQuery(patch, { push = false, replace } = {}) {
  const r = parseHash();
  const q = { ...r.q, ...patch };
  for (const k of Object.keys(q)) if (q[k] == null || q[k] === "") delete q[k];
  const next = hashFor(r.path, q);
  if (next === location.hash) return;
  if (push && !replace) history.pushState(null, "", next);
  else history.replaceState(null, "", next);
  route();
}

function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

function setCrumbs(items) {
  clear(crumbsEl);
  const title = items.title;
  items.forEach((c, i) => {
    if (i) crumbsEl.append(h("span.sep", "/"));
    crumbsEl.append(c.href ? h("a", { href: c.href }, c.label) : h("span.here", c.label));
  });
  const last = items[items.length - 1];
  document.title = title ? `${title} · TAE` : last ? `${last.title || last.label} · TAE` : "TAE";
}

const app = { setQuery, go, setCrumbs, route: () => parseHash() };

window.addEventListener("hashchange", route);

// ---- keyboard --------------------------------------------------------------
const helpEl = document.getElementById("help");
function openHelp() { helpEl.hidden = false; helpEl.querySelector("button")?.focus(); }
function closeHelp() { helpEl.hidden = true; }
helpEl.addEventListener("click", (e) => { if (e.target === helpEl || e.target.closest("[data-close]")) closeHelp(); });
document.getElementById("help-btn").addEventListener("click", () => (helpEl.hidden ? openHelp() : closeHelp()));

function typing(el) {
  return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
}

document.addEventListener("keydown", (e) => {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const keys = current?.view.keys || {};
  if (e.key === "Escape") {
    if (!helpEl.hidden) { closeHelp(); e.preventDefault(); return; }
    if (keys.Escape?.(e) !== false && typing(document.activeElement)) document.activeElement.blur();
    return;
  }
  if (typing(e.target)) {
    // In a list's filter box, Enter opens the selection and the arrows move it.
    if (e.target.dataset.enterKey) {
      const fn = { Enter: keys.Enter, ArrowDown: keys.j, ArrowUp: keys.k }[e.key];
      if (fn) { fn(e); e.preventDefault(); }
    }
    return;
  }
  // Enter on a focused button or link activates it, as usual.
  if (e.key === "Enter" && e.target.closest?.("a, button, summary, [role=button]")) return;
  if (e.key === "?") { helpEl.hidden ? openHelp() : closeHelp(); e.preventDefault(); return; }
  if (!helpEl.hidden) return;
  const fn = keys[e.key];
  if (fn) {
    if (fn(e) !== false) e.preventDefault();
  }
});

// ---- live indicator, version, sign-in --------------------------------------
const liveEl = document.getElementById("live");
api.onLiveChange(({ open, down }) => {
  liveEl.className = "live " + (down ? "down" : open ? "up" : "idle");
  liveEl.title = down ? "Live updates: reconnecting to taed…" : open ? "Live updates: connected" : "Live updates: none on this page";
  liveEl.querySelector(".lbl").textContent = down ? "reconnecting" : open ? "live" : "";
});

api.setUnauthorizedHandler(() => {
  if (current) { try { current.view.unmount?.(); } catch { /* ignore */ } current = null; }
  window.removeEventListener("hashchange", route);
  clear(main);
  setCrumbs(Object.assign([], { title: "Not signed in" }));
  main.append(h("div.signin",
    h("h1", "Not signed in"),
    h("p", "Open the URL that ", h("code", "taectl ui"), " prints (it carries the token)."),
    h("p.muted", "The link sets a session cookie for this browser and brings you back here.")));
});

api.session().then((s) => {
  if (s?.version) document.getElementById("version").textContent = "taed " + s.version;
}).catch(() => {});

route();
