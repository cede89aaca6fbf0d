// The run view's Logs tab (#/r/<id>?tab=logs&q=text&stream=all|stdout|stderr).
// It opens at the end of the log (the last 1000 lines, tail=) and follows it over SSE. Scrolling
// up loads older pages (before=), scrolling down past what is loaded loads newer ones (after=).
// Lines have a fixed height, so only the rows in sight exist in the DOM however long the log
// is; at most MAX_LINES stay in memory (the far side is dropped and loaded again when needed).
import { h, clear, fmtClock, fmtTime, debounce } from "./util.js";
import * as api from "./api.js";

const LH = 18;             // px per line, as in style.css .logline
const PAGE = 1000;
const BIG_PAGE = 10000;    // taed's largest page: a search jump loads older lines in these
const MAX_LINES = 300000;  // beyond this the lines furthest from where you are are dropped
const NEAR = 200;          // rows from an edge of what is loaded at which the next page is fetched
const FAR = 100000;        // a match further than this (in cursors) is loaded around, not up to

export function mountLogs(root, run, app, q0) {
  const id = run.id;
  const logsUrl = `/api/runs/${id}/logs`;
  let q = q0;
  // The loaded part of the log, ascending by cursor, and the rows shown: the lines that pass
  // the stream filter and {sep: attempt, cursor} where the attempt changes.
  let lines = [];
  let rows = [];
  let atStart = false;     // lines[0] is the log's first line
  let atEnd = false;       // lines reach the end of the log (the stream appends to them)
  let finished = false;    // ... and the run is final: nothing more will come
  let next = 0;            // the stream's after=
  let gen = 0;             // bumped when the loaded window is replaced: older answers are dropped
  let opening = false, streaming = false, error = null;
  let olderP = null, newerP = null, olderChain = 0;
  let follow = true;
  let matches = [], truncated = false, cur = -1, searching = false, jumpGen = 0;
  let searchDone = Promise.resolve();
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
  const followBtn = h("button.btn.follow-btn", { hidden: true, onclick: () => toEnd(), title: "Follow the end of the log (f)" }, "↓ Follow");
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

  // ---- the loaded lines ----
  const needle = () => (q.q || "").toLowerCase();
  const shown = (l) => !q.stream || q.stream === "all" || l.stream === q.stream;
  const firstCursor = () => (lines.length ? lines[0].cursor : null);
  const lastCursor = () => (lines.length ? lines[lines.length - 1].cursor : null);
  const isLoaded = (c) => lines.length > 0 && c >= lines[0].cursor && c <= lines[lines.length - 1].cursor;

  function rowsOf(ls, prev) {
    const out = [];
    for (const l of ls) {
      if (prev && l.attempt !== prev.attempt) out.push({ sep: l.attempt, cursor: l.cursor - 0.5 });
      prev = l;
      if (shown(l)) out.push(l);
    }
    return out;
  }
  function rebuildRows() { rows = rowsOf(lines, null); }

  // Lines after the last loaded one (the stream, or a newer page).
  function append(ls) {
    const last = lastCursor() ?? -Infinity;
    const fresh = (ls || []).filter((l) => l.cursor > last);
    if (!fresh.length) return;
    const prev = lines.length ? lines[lines.length - 1] : null;
    for (const l of fresh) lines.push(l);
    for (const r of rowsOf(fresh, prev)) rows.push(r);
    // lines that arrived after the search ran
    const n = needle();
    if (n) {
      for (const l of fresh) {
        if (l.text.toLowerCase().includes(n) && (!matches.length || l.cursor > matches[matches.length - 1])) matches.push(l.cursor);
      }
    }
    if (lines.length > MAX_LINES) {
      // drop the oldest, keeping what is in sight where it is
      const before = rows.length;
      lines = lines.slice(lines.length - (MAX_LINES - PAGE));
      rebuildRows();
      atStart = false;
      if (!follow) { layout(); setTop(box.scrollTop - (before - rows.length) * LH); }
    }
  }

  // Lines before the first loaded one: the rows above grow and what is in sight stays put.
  function prepend(ls) {
    const first = firstCursor() ?? Infinity;
    const fresh = (ls || []).filter((l) => l.cursor < first);
    if (!fresh.length) return;
    const before = rows.length;
    lines = fresh.concat(lines);
    rebuildRows();
    const added = rows.length - before;
    if (lines.length > MAX_LINES) {
      // drop the newest: the window no longer reaches the end
      lines = lines.slice(0, MAX_LINES - PAGE);
      rebuildRows();
      atEnd = false;
      finished = false;
      follow = false;
      closeStream();
    }
    layout();
    if (follow) setTop(box.scrollHeight);
    else setTop(box.scrollTop + added * LH);
    paint();
  }

  // ---- loading ----
  function resetWindow(ls) {
    lines = ls;
    rebuildRows();
  }

  // The end of the log, followed from there (the opening view, and "f" from elsewhere).
  async function openAtEnd() {
    const g = ++gen;
    closeStream();
    opening = true;
    drawStatus();
    try {
      const page = await api.get(`${logsUrl}?tail=${PAGE}`, { signal: ctl.signal });
      if (g !== gen) return;
      resetWindow(page.lines || []);
      atStart = lines.length < PAGE;
      atEnd = true;
      finished = !!page.finished;
      next = page.next || lastCursor() || 0;
      error = null;
      follow = true;
      opening = false;
      layout();
      setTop(box.scrollHeight);
      paint();
      if (!finished) openStream();
      maybeLoad();  // a stream filter may leave the box half empty
    } catch (e) {
      if (e.name === "AbortError" || g !== gen) return;
      opening = false;
      error = e;
      setTimeout(() => { if (!stopped && g === gen) openAtEnd(); }, 3000);
    } finally {
      drawStatus();
    }
  }

  // Lines around cursor c (a search match far from what is loaded): half a page before it, a page
  // from it on.
  async function openAround(c) {
    const g = ++gen;
    closeStream();
    opening = true;
    drawStatus();
    try {
      const [older, newer] = await Promise.all([
        api.get(`${logsUrl}?before=${c}&limit=${PAGE / 2}`, { signal: ctl.signal }),
        api.get(`${logsUrl}?after=${Math.max(0, c - 1)}&limit=${PAGE}`, { signal: ctl.signal }),
      ]);
      if (g !== gen) return;
      resetWindow([...(older.lines || []), ...(newer.lines || [])]);
      atStart = (older.lines || []).length < PAGE / 2;
      atEnd = (newer.lines || []).length < PAGE || !!newer.finished;
      finished = atEnd && !!newer.finished;
      follow = false;
      error = null;
      opening = false;
      layout();
      if (atEnd && !finished) { next = newer.next || lastCursor() || 0; openStream(); }
    } catch (e) {
      if (e.name === "AbortError" || g !== gen) return;
      opening = false;
      error = e;
    } finally {
      drawStatus();
    }
  }

  // One page before the first loaded line. Resolves to false when it failed (or the window was
  // replaced meanwhile); a load already on its way is shared.
  function loadOlder(limit = PAGE) {
    if (olderP) return olderP;
    if (atStart || opening || !lines.length) return Promise.resolve(false);
    const g = gen;
    olderP = (async () => {
      try {
        const page = await api.get(`${logsUrl}?before=${firstCursor()}&limit=${limit}`, { signal: ctl.signal });
        if (g !== gen) return false;
        const got = page.lines || [];
        if (got.length < limit) atStart = true;
        prepend(got);
        error = null;
        return true;
      } catch (e) {
        if (e.name !== "AbortError" && g === gen) error = e;
        await new Promise((r) => setTimeout(r, 3000));  // no retry storm from the scroll handler
        return false;
      }
    })();
    olderP.finally(() => {
      olderP = null;
      drawStatus();
      // a stream filter can leave a page with few rows: keep going (a few pages) while the top is in sight
      if (olderChain > 0 && !atStart && !stopped && nearTop()) { olderChain--; loadOlder(); }
    });
    drawStatus();
    return olderP;
  }

  // One page after the last loaded line; reaching the end reopens the live stream.
  function loadNewer(limit = PAGE) {
    if (newerP) return newerP;
    if (atEnd || opening || !lines.length) return Promise.resolve(false);
    const g = gen;
    newerP = (async () => {
      try {
        const page = await api.get(`${logsUrl}?after=${lastCursor()}&limit=${limit}`, { signal: ctl.signal });
        if (g !== gen) return false;
        const got = page.lines || [];
        append(got);
        if (got.length < limit || page.finished) {
          atEnd = true;
          finished = !!page.finished;
          next = page.next || lastCursor() || 0;
          if (!finished) openStream();
        }
        error = null;
        draw();
        return true;
      } catch (e) {
        if (e.name !== "AbortError" && g === gen) error = e;
        await new Promise((r) => setTimeout(r, 3000));
        return false;
      }
    })();
    newerP.finally(() => { newerP = null; drawStatus(); });
    drawStatus();
    return newerP;
  }

  function openStream() {
    closeStream();
    const g = gen;
    streaming = true;
    const mine = api.stream(() => `${logsUrl}/stream?after=${next}`, {
      lines: (page) => {
        if (g !== gen || es !== mine) return;
        append(page.lines);
        if (page.next != null && page.next > next) next = page.next;
        if (page.finished) { finished = true; closeStream(); }
        draw();
      },
      // taed's last word on a final run (after its last lines)
      end: (e) => {
        if (g !== gen || es !== mine) return;
        if (e && e.next != null && e.next > next) next = e.next;
        finished = true;
        closeStream();
        drawStatus();
      },
      // taed could not read the run's log (e.g. the run is gone)
      failed: (e) => {
        if (g !== gen || es !== mine) return;
        closeStream();
        error = new Error((e && e.error) || "the log stream failed");
        drawStatus();
      },
      open: () => drawStatus(),
    });
    es = mine;
  }
  function closeStream() {
    streaming = false;
    if (es) { es.close(); es = null; }
  }

  // Near an edge of what is loaded: fetch the next page that way (and up to `chain` more older
  // ones while the top stays in sight).
  const nearTop = () => Math.floor(box.scrollTop / LH) < NEAR;
  const nearBottom = () => rows.length - Math.ceil((box.scrollTop + box.clientHeight) / LH) < NEAR;
  function maybeLoad(chain = 10) {
    olderChain = chain;
    if (!atStart && nearTop()) loadOlder();
    if (!atEnd && nearBottom()) loadNewer();
  }

  // ---- drawing ----
  // The scroll position we set last: a scroll event elsewhere is the user's.
  let ourTop = -1;
  function setTop(v) {
    box.scrollTop = Math.max(0, v);
    ourTop = box.scrollTop;
  }
  function layout() { spacer.style.height = rows.length * LH + "px"; }
  let raf = 0;
  function draw() {
    if (raf) return;
    raf = requestAnimationFrame(() => {
      raf = 0;
      layout();
      if (follow) setTop(box.scrollHeight);
      paint();
      drawStatus();
    });
  }
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
    const last = Math.min(rows.length, Math.ceil((box.scrollTop + box.clientHeight) / LH) + 30);
    const curCursor = cur >= 0 ? matches[cur] : null;
    const frag = document.createDocumentFragment();
    for (let k = first; k < last; k++) {
      const e = rows[k];
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
    const nl = lines.length;
    if (nl || (!opening && !error)) parts.push(`${nl.toLocaleString()} lines${atStart ? "" : " loaded"}`);
    if (q.stream && q.stream !== "all") parts.push(`${q.stream} only`);
    if (error) parts.push(h("span.bad", error.message));
    if (opening || (error && !nl)) parts.push(opening ? "loading…" : "trying again…");
    else {
      if (olderP) parts.push("loading older lines…");
      else if (!atStart) {
        parts.push(h("button.btn.small.ghost", { onclick: () => { olderChain = 10; loadOlder(); }, title: "Or scroll to the top" }, "load older lines"));
      }
      if (newerP) parts.push("loading newer lines…");
      else if (!atEnd) parts.push("newer lines below (f: the end)");
      else if (finished) parts.push(nl ? "end of the log (the run is final)" : "no output: the run is final");
      else if (streaming) parts.push(follow ? "following live output" : "live output paused while you scroll up");
      if (nl === 0 && atEnd && !finished) parts.push("no output yet");
    }
    clear(status).append(...parts.flatMap((p, i) => (i ? [h("span.faint", "·"), p] : [p])));
    followBtn.hidden = follow || (atEnd && rows.length === 0);
    const n = matches.length;
    count.textContent = !needle() ? "" : searching ? "searching…" : n === 0 ? "no match" :
      `${cur >= 0 ? cur + 1 : "–"} / ${n}${truncated ? "+" : ""}`;
  }

  box.addEventListener("scroll", () => {
    if (box.scrollTop !== ourTop) {
      // the user's scroll: follow only at the bottom of a window that reaches the end
      ourTop = -1;
      follow = atEnd && box.scrollTop + box.clientHeight >= box.scrollHeight - LH;
      maybeLoad();
    }
    if (!raf) raf = requestAnimationFrame(() => { raf = 0; paint(); drawStatus(); });
  });
  function toEnd() {
    if (!atEnd) { openAtEnd(); return; }
    follow = true;
    setTop(box.scrollHeight);
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
      matches = lines.filter((l) => l.text.toLowerCase().includes(n)).map((l) => l.cursor);
    } finally { searching = false; }
    paint();
    drawStatus();
  }

  // The first row at or after cursor c.
  function lowerBound(c) {
    let lo = 0, hi = rows.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (rows[mid].cursor < c) lo = mid + 1; else hi = mid;
    }
    return lo;
  }
  function indexOfCursor(c) {
    const k = lowerBound(c);
    return k < rows.length && rows[k].cursor === c ? k : -1;
  }

  // Load what it takes for line c to be in memory: older pages up to it, newer pages down to it,
  // or (far away) the lines around it; a line just written waits for the stream.
  async function reveal(c) {
    const g = gen;
    if (!lines.length) {
      for (let t = 0; t < 50 && !lines.length && !stopped && g === gen && (opening || streaming); t++) await sleep(100);
      if (!lines.length && g === gen) await openAround(c);
      return;
    }
    if (c < firstCursor()) {
      if (atStart) return;
      if (firstCursor() - c > FAR) { await openAround(c); return; }
      while (!stopped && g === gen && lines.length && c < firstCursor() && !atStart) {
        // cursors count every run's lines, so this many reach c (and half a page of context)
        if (!(await loadOlder(Math.min(BIG_PAGE, Math.max(PAGE, firstCursor() - c + PAGE / 2))))) return;
      }
    } else if (c > lastCursor()) {
      if (atEnd) {
        for (let t = 0; t < 50 && c > lastCursor() && streaming && !stopped && g === gen; t++) await sleep(100);
        return;
      }
      if (c - lastCursor() > FAR) { await openAround(c); return; }
      while (!stopped && g === gen && lines.length && c > lastCursor() && !atEnd) {
        if (!(await loadNewer(Math.min(BIG_PAGE, Math.max(PAGE, c - lastCursor() + PAGE / 2))))) return;
      }
    }
  }

  async function jump(dir) {
    if (!matches.length) return;
    const my = ++jumpGen;
    // the next match after the current one (or the first/last), skipping lines the stream filter hides
    for (let tries = 0; tries < matches.length; tries++) {
      cur = cur < 0 ? (dir > 0 ? 0 : matches.length - 1) : (cur + dir + matches.length) % matches.length;
      const c = matches[cur];
      if (!isLoaded(c)) {
        count.textContent = "loading…";
        await reveal(c);
        if (my !== jumpGen || stopped) return;
      }
      const k = indexOfCursor(c);
      if (k >= 0) {
        follow = false;
        layout();
        setTop(k * LH - box.clientHeight / 2 + LH);
        paint();
        drawStatus();
        return;
      }
    }
    drawStatus();
  }

  openAtEnd();
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
        // keep the line at the top of the view there
        const top = rows[Math.floor(box.scrollTop / LH)]?.cursor;
        rebuildRows();
        layout();
        if (follow) setTop(box.scrollHeight);
        else if (top != null) setTop(lowerBound(top) * LH);
        paint();
        maybeLoad();
        drawStatus();
      }
    },
    unmount() { stopped = true; gen++; closeStream(); ctl.abort(); writeQ.cancel(); if (raf) cancelAnimationFrame(raf); },
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
      f: () => toEnd(),
      j: () => { box.scrollTop += LH * 3; }, k: () => { box.scrollTop -= LH * 3; },
    },
  };
}

function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }
