// The run view's Logs tab (#/r/<id>?tab=logs&q=text&stream=all|stdout|stderr).
// Pages of 1000 lines by cursor, then a live tail over SSE. Lines have a fixed height, so
// only the rows in sight exist in the DOM however long the log is.
import { h, clear, fmtClock, fmtTime, debounce } from "./util.js";
import * as api from "./api.js";

const LH = 18;             // px per line, as in style.css .logline
const PAGE = 1000;
const MAX_LINES = 300000;  // beyond this the oldest lines are dropped from memory

export function mountLogs(root, run, app, q0) {
  const id = run.id;
  let q = q0;
  let entries = [];        // {cursor, attempt, stream, text, time} and {sep: attempt, cursor}
  let view = [];           // indices into entries shown under the stream filter
  let next = 0;            // cursor to pass as after=
  let lastCursor = -1;
  let lastAttempt = null;
  let dropped = 0, nLines = 0;
  let searchDone = Promise.resolve();
  let finished = false, streaming = false, loadingPages = false, error = null;
  let follow = true;
  let matches = [], truncated = false, cur = -1, searching = false;
  let es = null, stopped = false;
  const ctl = new AbortController();

  const search = h("input", {
    type: "search", placeholder: "Search the log  ( / ,  n / N )", value: q.q || "", "aria-label": "Search the log",
    dataset: { enterKey: "1" },
  });
  const count = h("span.muted.mono");
  const streamSel = h("span.grp", ["all", "stdout", "stderr"].map((s) => h("button.btn" + ((q.stream || "all") === s ? ".on" : ""), {
    onclick: () => app.setQuery({ stream: s === "all" ? null : s }), dataset: { s },
  }, s)));
  const box = h("div.logbox", { tabindex: 0 });
  const spacer = h("div.spacer-y");
  box.append(spacer);
  const followBtn = h("button.btn.follow-btn", { hidden: true, onclick: () => toBottom(), title: "Follow the end of the log (f)" }, "↓ Follow");
  const status = h("div.log-status");
  root.append(
    h("div.toolbar", search,
      h("button.btn", { onclick: () => jump(-1), title: "Previous match (N)" }, "↑"),
      h("button.btn", { onclick: () => jump(1), title: "Next match (n)" }, "↓"),
      count, h("span.spacer"), streamSel,
      h("a.btn", { href: `/api/runs/${id}/logs.txt`, download: "" }, "Download")),
    h("div", { style: { position: "relative" } }, box, followBtn),
    status);

  const writeQ = debounce((v) => app.setQuery({ q: v || null }), 250);
  search.addEventListener("input", () => writeQ(search.value));

  // ---- data ----
  const shown = (e) => e.sep != null || !q.stream || q.stream === "all" || e.stream === q.stream;
  function add(lines) {
    const before = entries.length;
    for (const l of lines || []) {
      if (l.cursor <= lastCursor) continue;  // a reconnect may resend
      if (lastAttempt != null && l.attempt !== lastAttempt) entries.push({ sep: l.attempt, cursor: l.cursor - 0.5 });
      lastAttempt = l.attempt;
      lastCursor = l.cursor;
      entries.push(l);
      nLines++;
      if (needle() && l.text.toLowerCase().includes(needle()) && (!matches.length || l.cursor > matches[matches.length - 1])) matches.push(l.cursor);
    }
    if (entries.length > MAX_LINES) {
      const cut = entries.length - MAX_LINES;
      const gone = entries.slice(0, cut).filter((e) => e.sep == null).length;
      dropped += gone;
      nLines -= gone;
      entries = entries.slice(cut);
      rebuildView();
    } else {
      for (let i = before; i < entries.length; i++) if (shown(entries[i])) view.push(i);
    }
    if (entries.length !== before) draw(follow);
  }
  function rebuildView() {
    view = [];
    entries.forEach((e, i) => { if (shown(e)) view.push(i); });
  }

  async function loadPages() {
    loadingPages = true;
    drawStatus();
    try {
      while (!stopped) {
        const page = await api.get(`/api/runs/${id}/logs?after=${next}&limit=${PAGE}`, { signal: ctl.signal });
        add(page.lines);
        if (page.next != null) next = page.next;
        if (page.finished) { finished = true; break; }
        if ((page.lines || []).length < PAGE) break;
      }
      error = null;
    } catch (e) {
      if (e.name === "AbortError") return;
      error = e;
      setTimeout(() => { if (!stopped) loadPages(); }, 3000);
      return;
    } finally {
      loadingPages = false;
      drawStatus();
    }
    if (!finished && !stopped) openStream();
  }

  function openStream() {
    streaming = true;
    es = api.stream(() => `/api/runs/${id}/logs/stream?after=${next}`, {
      lines: (page) => {
        add(page.lines);
        if (page.next != null) next = page.next;
        if (page.finished) { finished = true; streaming = false; es.close(); }
        drawStatus();
      },
      // taed's last word on a final run (after its last lines)
      end: (e) => {
        if (e && e.next != null) next = e.next;
        finished = true; streaming = false; es.close();
        drawStatus();
      },
      // taed could not read the run's log (e.g. the run is gone)
      failed: (e) => {
        streaming = false; es.close();
        error = new Error((e && e.error) || "the log stream failed");
        drawStatus();
      },
      open: () => drawStatus(),
    });
  }

  // ---- drawing ----
  let raf = 0;
  function draw(stick = false) {
    if (stick) follow = true;
    if (raf) return;
    raf = requestAnimationFrame(() => {
      raf = 0;
      spacer.style.height = view.length * LH + "px";
      if (follow) box.scrollTop = box.scrollHeight;
      paint();
      drawStatus();
    });
  }
  const needle = () => (q.q || "").toLowerCase();
  function highlighted(text, isCur) {
    const n = needle();
    if (!n) return text;
    const low = text.toLowerCase();
    const out = [];
    let at = 0;
    for (let i = low.indexOf(n); i >= 0; i = low.indexOf(n, i + n.length)) {
      out.push(text.slice(at, i), h("mark" + (isCur ? ".cur" : ""), text.slice(i, i + n.length)));
      at = i + n.length;
    }
    out.push(text.slice(at));
    return out;
  }
  function paint() {
    const first = Math.max(0, Math.floor(box.scrollTop / LH) - 30);
    const last = Math.min(view.length, Math.ceil((box.scrollTop + box.clientHeight) / LH) + 30);
    const curCursor = cur >= 0 ? matches[cur] : null;
    const frag = document.createDocumentFragment();
    for (let k = first; k < last; k++) {
      const e = entries[view[k]];
      const top = k * LH + "px";
      if (e.sep != null) {
        frag.append(h("div.logline.attempt", { style: { top } }, h("span.tx", `attempt ${e.sep}`)));
        continue;
      }
      const isCur = e.cursor === curCursor;
      frag.append(h("div.logline" + (e.stream === "stderr" ? ".stderr" : "") + (isCur ? ".cur" : ""), { style: { top }, dataset: { cursor: e.cursor, stream: e.stream } },
        h("span.t", { title: fmtTime(e.time) }, fmtClock(e.time)), h("span.tx", highlighted(e.text, isCur))));
    }
    clear(spacer).append(frag);
  }
  function drawStatus() {
    const parts = [];
    const nl = nLines;
    parts.push(`${nl.toLocaleString()} lines${dropped ? ` (the first ${dropped.toLocaleString()} dropped from view: download the full log)` : ""}`);
    if (view.length !== entries.length && q.stream && q.stream !== "all") parts.push(`${q.stream} only`);
    if (error) parts.push(h("span.bad", error.message));
    else if (loadingPages) parts.push("loading…");
    else if (finished) parts.push(nl ? "end of the log (the run is final)" : "no output: the run is final");
    else if (streaming) parts.push(follow ? "following live output" : "live output paused while you scroll up");
    if (nl === 0 && !loadingPages && !finished) parts.push("no output yet");
    clear(status).append(...parts.flatMap((p, i) => (i ? [h("span.faint", "·"), p] : [p])));
    followBtn.hidden = follow || view.length === 0;
    const n = matches.length;
    count.textContent = !needle() ? "" : searching ? "searching…" : n === 0 ? "no match" :
      `${cur >= 0 ? cur + 1 : "–"} / ${n}${truncated ? "+" : ""}`;
  }

  let programmatic = false;
  box.addEventListener("scroll", () => {
    const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - LH;
    if (!programmatic) follow = atBottom;
    programmatic = false;
    if (!raf) raf = requestAnimationFrame(() => { raf = 0; paint(); drawStatus(); });
  });
  function toBottom() {
    follow = true;
    box.scrollTop = box.scrollHeight;
    draw();
  }

  // ---- search ----
  async function runSearch() {
    matches = []; truncated = false; cur = -1;
    const n = needle();
    if (!n) { draw(); return; }
    searching = true;
    drawStatus();
    try {
      const r = await api.get(`/api/runs/${id}/logs/search?q=${encodeURIComponent(q.q)}`, { signal: ctl.signal });
      matches = r.matches || [];
      truncated = !!r.truncated;
    } catch (e) {
      if (e.name === "AbortError") return;
      // fall back to what is loaded
      matches = entries.filter((e) => e.sep == null && e.text.toLowerCase().includes(n)).map((e) => e.cursor);
    } finally { searching = false; }
    paint();
    drawStatus();
  }

  function indexOfCursor(c) {
    let lo = 0, hi = view.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const mc = entries[view[mid]].cursor;
      if (mc === c) return mid;
      if (mc < c) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
  }
  async function waitLoaded(c) {
    for (let t = 0; t < 600 && lastCursor < c && !finished && !stopped; t++) {
      if (!loadingPages && !streaming) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  async function jump(dir) {
    if (!matches.length) return;
    // the next match after the one in view (or the first/last), skipping lines hidden by the stream filter
    for (let tries = 0; tries < matches.length; tries++) {
      cur = cur < 0 ? (dir > 0 ? 0 : matches.length - 1) : (cur + dir + matches.length) % matches.length;
      const c = matches[cur];
      if (c > lastCursor) { count.textContent = "loading…"; await waitLoaded(c); }
      const k = indexOfCursor(c);
      if (k >= 0) {
        follow = false;
        programmatic = true;
        box.scrollTop = Math.max(0, k * LH - box.clientHeight / 2 + LH);
        paint();
        drawStatus();
        return;
      }
    }
    drawStatus();
  }

  loadPages();
  if (needle()) searchDone = runSearch();
  drawStatus();

  return {
    update(nq) {
      const old = q;
      q = nq;
      if ((old.q || "") !== (q.q || "")) {
        if (search.value !== (q.q || "")) search.value = q.q || "";
        searchDone = runSearch();
      }
      if ((old.stream || "") !== (q.stream || "")) {
        streamSel.querySelectorAll("button").forEach((b) => b.classList.toggle("on", b.dataset.s === (q.stream || "all")));
        rebuildView();
        draw();
      }
    },
    unmount() { stopped = true; es?.close(); ctl.abort(); writeQ.cancel(); if (raf) cancelAnimationFrame(raf); },
    keys: {
      "/": () => { search.focus(); search.select(); },
      n: () => jump(1), N: () => jump(-1),
      Enter: async () => {
        if (search.value !== (q.q || "")) {
          writeQ.cancel();
          app.setQuery({ q: search.value || null });
          await searchDone;
        }
        jump(1);
      },
      f: () => toBottom(),
      j: () => { box.scrollTop += LH * 3; }, k: () => { box.scrollTop -= LH * 3; },
    },
  };
}
