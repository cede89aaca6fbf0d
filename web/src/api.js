// Talking to taed: JSON GETs, CSRF-protected POSTs and server-sent event streams.
// The session cookie rides along on every same-origin request; a 401 anywhere means
// the browser has no valid cookie and the whole page says so.

export class ApiError extends Error {
  constructor(message, status = 0) {
    super(message);
    this.status = status;
  }
}

export const NOT_ANSWERING = "taed did not answer";

let unauthorized = false;
let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

function signalUnauthorized() {
  if (unauthorized) return;
  unauthorized = true;
  for (const s of [...streams]) s.close();
  onUnauthorized();
}

async function errorFrom(res) {
  let msg = `${res.status} ${res.statusText}`.trim();
  try {
    const body = await res.json();
    if (body && body.error) msg = body.error;
  } catch { /* not JSON */ }
  return new ApiError(msg, res.status);
}

export async function get(path, { signal } = {}) {
  let res;
  try {
    res = await fetch(path, { signal, headers: { Accept: "application/json" }, credentials: "same-origin" });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(NOT_ANSWERING, 0);
  }
  if (res.status === 401) {
    signalUnauthorized();
    throw new ApiError("not signed in", 401);
  }
  if (!res.ok) throw await errorFrom(res);
  try {
    return await res.json();
  } catch {
    throw new ApiError(`${path}: the answer is not JSON`, res.status);
  }
}

let sessionPromise = null;
export function session(refresh = false) {
  if (refresh || !sessionPromise) {
    sessionPromise = get("/api/session").catch((e) => { sessionPromise = null; throw e; });
  }
  return sessionPromise;
}

// POST an action. A 403 may mean taed restarted with a new CSRF token: fetch it once more and retry.
export async function post(path, body) {
  for (let attempt = 0; attempt < 2; attempt++) {
    const { csrf } = await session(attempt > 0);
    let res;
    try {
      res = await fetch(path, {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRF-Token": csrf, "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(body ?? {}),
      });
    } catch {
      throw new ApiError(NOT_ANSWERING, 0);
    }
    if (res.status === 401) {
      signalUnauthorized();
      throw new ApiError("not signed in", 401);
    }
    if (res.status === 403 && attempt === 0) continue;
    if (!res.ok) throw await errorFrom(res);
    try { return await res.json(); } catch { return { ok: true }; }
  }
  throw new ApiError("taed refused the CSRF token", 403);
}

// ---- server-sent events ----------------------------------------------------
// stream(() => url, {changed: fn}) opens an EventSource and reopens it (with a fresh URL, so a
// log tail resumes at its cursor) 2 s after it fails. close() stops it for good. Handlers `open`
// (every connection) and `reopen` (every one after the first: refetch what may have changed
// while the stream was down) are not event names; nor is `error`, which EventSource uses for a
// lost connection (taed reports its own failures as `event: failed`).
const streams = new Set();
let liveListener = () => {};
export function onLiveChange(fn) { liveListener = fn; }
function notifyLive() {
  let open = 0, down = 0;
  for (const s of streams) (s.up ? open++ : down++);
  liveListener({ open, down });
}

export function stream(urlFn, handlers) {
  const s = { es: null, up: false, closed: false, timer: 0, opens: 0 };
  const connect = () => {
    if (s.closed || unauthorized) return;
    const es = new EventSource(urlFn(), { withCredentials: true });
    s.es = es;
    es.onopen = () => {
      s.up = true;
      notifyLive();
      handlers.open?.();
      if (s.opens++ > 0) handlers.reopen?.();
    };
    es.onerror = () => {
      es.close();
      s.up = false;
      notifyLive();
      if (s.closed) return;
      // EventSource cannot see a 401: ask an ordinary endpoint, which reports it.
      session(true).catch(() => {});
      clearTimeout(s.timer);
      s.timer = setTimeout(connect, 2000);
    };
    for (const [name, fn] of Object.entries(handlers)) {
      if (name === "open" || name === "reopen" || name === "error") continue;
      es.addEventListener(name, (ev) => {
        let data = null;
        try { data = JSON.parse(ev.data); } catch { data = ev.data; }
        fn(data);
      });
    }
  };
  s.close = () => {
    s.closed = true;
    clearTimeout(s.timer);
    s.es?.close();
    streams.delete(s);
    notifyLive();
  };
  s.connect = connect;
  streams.add(s);
  if (!document.hidden) connect();
  notifyLive();
  return s;
}

// A browser holds at most 6 connections to one host, and every open dashboard tab keeps its
// streams open: a hidden tab lets go of them, and when it is shown again it reconnects and its
// view refetches (the `reopen` handler) what changed meanwhile.
document.addEventListener("visibilitychange", () => {
  for (const s of streams) {
    if (s.closed) continue;
    if (document.hidden) {
      clearTimeout(s.timer);
      s.es?.close();
      s.es = null;
      s.up = false;
      if (s.opens > 0) s.opens = 1;  // the next open is a reopen
    } else if (!s.es) {
      if (s.opens === 0) s.opens = 1;  // opened hidden: the view loaded without it
      s.connect();
    }
  }
  notifyLive();
});

