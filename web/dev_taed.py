#!/usr/bin/python3
"""The real taed on a seeded TAE_HOME, for working on the dashboard.

Starts taed with one local agent (`taectl up`) on a new temporary TAE_HOME (or --home), submits
the study in web/dev_seed/ (real runs: tae-train and command jobs, finished, failed, retried,
cancelled, paused, waiting for an agent, and a live study that streams points and log lines for
--live-minutes), prints the dashboard's URL and keeps everything up until Ctrl-C, then stops
taed and removes the temporary home.

    /usr/bin/python3 web/dev_taed.py [--port 8765] [--home DIR] [--web src|embedded]

--web src (the default): the URL is a small front on --port that serves web/src from the working
tree, exactly as web/embed.py would embed it (hashed assets, import map, CSP), read again on every
page load, and passes every other request (/api, the sign-in, SSE streams) to taed unchanged but
for the Host and Origin headers, which it points at taed. So an edit to web/src shows on a reload,
without rebuilding taed. --web embedded: the URL is taed's own, with the files compiled into it
(rebuild taed to see an edit: `cmake --build build --target taed`).

Needs build/bin/{taed,taectl,tae-agent,tae-train} (or --bin) and `npm ci` in web/. Python 3
standard library only; web/dev_screenshots.py uses it as a module (DevTaed).
"""

import argparse
import http.client
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEED = os.path.join(HERE, "dev_seed")
sys.path.insert(0, HERE)
import embed  # noqa: E402  (web/embed.py: what taed embeds, built from the working tree)

# The seeded study, in submit order. The live study goes first in the queue (priority 1).
FINITE = ["quickstart", "lr-sweep", "asha", "flaky", "long-log"]
SPECS = FINITE + ["cancelled", "paused", "needs-tpu", "live"]
SLOTS = 8  # live 4, the rest share 4 (the command jobs mostly sleep; tae-train uses 1 thread)
FINAL = {"succeeded", "failed", "cancelled", "lost", "pruned"}


class DevError(Exception):
    pass


def wait_for(what, pred, timeout, every=0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise DevError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


class DevTaed:
    """taed on a seeded home. start() brings it up and seeds it (once per home); stop() takes it
    down and removes a temporary home. stop_taed()/start_taed() restart taed alone (the home and
    the front stay), as a test of a dead taed needs."""

    def __init__(self, bin_dir=None, home=None, port=0, web="src", live_minutes=60, log=print):
        self.bin = os.path.abspath(bin_dir or os.path.join(ROOT, "build", "bin"))
        self.temp = None if home else tempfile.mkdtemp(prefix="tae-dev-")
        self.home = os.path.abspath(home) if home else os.path.join(self.temp, "home")
        self.port = port
        self.web = web
        self.live_minutes = live_minutes
        self.log = log
        self.front = None
        self.taed_base = None  # http://127.0.0.1:PORT of taed itself
        self.cookie = None
        self.query = None  # the sign-in URL's query (token=...)
        self.ours = False  # whether start_taed() started it (a --home may have one running)

    # ---- taed ----

    def taectl(self, *args, timeout=120, check=True):
        p = subprocess.run([os.path.join(self.bin, "taectl"), "--home", self.home, *args],
                           capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise DevError(f"taectl {' '.join(args)}: exit {p.returncode}\n{p.stdout}{p.stderr}")
        return p.stdout

    def taectl_json(self, *args):
        return json.loads(self.taectl(*args, "--json"))

    def start_taed(self):
        for name in ("taed", "taectl", "tae-agent", "tae-train"):
            if not os.access(os.path.join(self.bin, name), os.X_OK):
                raise DevError(f"{self.bin}/{name} is missing: build first "
                               "(cmake -S . -B build && cmake --build build)")
        os.makedirs(self.home, exist_ok=True)
        up = self.taectl("up", "--agents", "1", "--slots", str(SLOTS))
        self.ours = "already running" not in up
        url = self.taectl("ui").strip()
        self.taed_base, self.query = url.split("/?", 1)
        # Sign in as a browser would, for api().
        with urllib.request.urlopen(url, timeout=10) as r:
            cookie = r.headers.get("Set-Cookie", "")
        self.cookie = cookie.split(";")[0]

    def stop_taed(self):
        p = subprocess.run([os.path.join(self.bin, "taectl"), "--home", self.home, "down"],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0 and "not running" not in p.stdout + p.stderr:
            self.log(f"taectl down: exit {p.returncode}: {(p.stdout + p.stderr).strip()}")

    def api(self, path, base=None):
        """GET a JSON answer from taed (signed in)."""
        req = urllib.request.Request((base or self.taed_base) + path,
                                     headers={"Cookie": self.cookie})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.load(r)

    def runs(self, exp):
        return self.taectl_json("runs", exp)

    # ---- the seeded study ----

    def seeded(self):
        return bool(self.taectl_json("ls"))

    def seed(self):
        t0 = time.monotonic()
        agent = self.taectl_json("agents")[0]["id"]
        # Drained while submitting: nothing starts until "paused" is paused.
        self.taectl("agents", "drain", agent)
        ids = {}
        for name in SPECS:
            extra = []
            if name == "live":
                extra = ["--set", f"params.steps={max(1, int(self.live_minutes * 120))}"]
            ids[name] = self.taectl_json("submit", os.path.join(SEED, name + ".toml"), *extra)[
                "experiment"]
        self.taectl("pause", "paused")
        self.taectl("agents", "undrain", agent)
        self.log(f"submitted {len(SPECS)} experiments; seeding...")

        def runs(exp):
            try:
                return self.runs(exp)
            except DevError:  # taectl's 10 s deadline, on a busy machine: ask again
                return []

        def final(exp):
            rs = runs(exp)
            return rs and all(r["state"] in FINAL for r in rs)

        wait_for("a run of 'cancelled' to start",
                 lambda: any(r["state"] == "running" for r in runs("cancelled")), 120)
        self.taectl("cancel", "cancelled")
        wait_for("'flaky' to finish", lambda: final("flaky"), 120)
        self.taectl("retry", "flaky", "--failed")
        for name in FINITE:
            wait_for(f"'{name}' to finish", lambda: final(name), 300)
        wait_for("the live runs to stream", lambda: all(
            r["state"] == "running" and (r["last_step"] or 0) > 10 for r in runs("live") or [{}]),
            120)
        self.log(f"seeded in {time.monotonic() - t0:.0f} s")
        return ids

    # ---- the whole thing ----

    def start(self):
        if self.web == "src":  # its port first: a port in use fails before anything starts
            self.front = Front(self.port, lambda: self.taed_base)
        self.start_taed()
        if self.seeded():
            self.log(f"{self.home} already has experiments: not seeding it again")
        else:
            self.seed()
        if self.front:
            self.front.start()
        return self

    def stop(self):
        if self.front:
            self.front.stop()
            self.front = None
        if self.ours:
            self.stop_taed()
        if self.temp:
            shutil.rmtree(self.temp, ignore_errors=True)
            self.temp = None

    @property
    def base(self):
        """Where the browser goes: the front (--web src) or taed itself."""
        return self.front.base if self.front else self.taed_base

    @property
    def url(self):
        """The sign-in URL, as `taectl ui` printed it, at base."""
        return f"{self.base}/?{self.query}"

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()


# ---- the front: web/src from the working tree, everything else taed's ----

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "upgrade",
       "content-length", "host"}


class Front:
    def __init__(self, port, taed_base):
        self.taed_base = taed_base  # a function: taed's port survives a restart (http.addr)
        self.assets = {}  # every hashed /assets/ path built so far -> (type, bytes)
        self.lock = threading.Lock()
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                front.handle(self)

            def do_POST(self):
                front.handle(self)

        try:
            self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        except OSError as e:
            raise DevError(f"127.0.0.1:{port}: {e.strerror} (--port picks another, 0 a free one)")
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self):
        self.thread.start()

    def stop(self):
        if self.thread.is_alive():
            self.server.shutdown()
        self.server.server_close()

    def build(self):
        entries, csp = embed.build(os.path.join(HERE, "src"),
                                   os.path.join(HERE, "node_modules", "uplot", "dist"))
        with self.lock:
            for path, ctype, data, _ in entries[1:]:
                self.assets[path] = (ctype, data)
        return entries[0][2], csp

    def handle(self, h):
        path = urllib.parse.urlsplit(h.path).path
        if h.command == "GET" and path.startswith("/assets/"):
            with self.lock:
                asset = self.assets.get(path)
            if asset is None:
                self.build()
                with self.lock:
                    asset = self.assets.get(path)
            if asset is None:
                return self.answer(h, 404, "text/plain", b"not found\n")
            return self.answer(h, 200, asset[0], asset[1],
                               [("Cache-Control", "public, max-age=31536000, immutable")])
        self.forward(h, page=h.command == "GET" and path in ("/", "/index.html"))

    def answer(self, h, status, ctype, body, headers=()):
        h.send_response_only(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def forward(self, h, page):
        """Passes the request to taed. The page (when taed lets this browser have it) is the
        working tree's; taed's other answers go back unchanged, SSE streams as they come. If
        taed does not answer, the connection closes without a response, as a dead taed's would."""
        upstream = urllib.parse.urlsplit(self.taed_base())
        body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in h.headers.items() if k.lower() not in HOP}
        headers["Host"] = upstream.netloc
        if "Origin" in headers:
            headers["Origin"] = f"{upstream.scheme}://{upstream.netloc}"
        headers["Connection"] = "close"
        conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=10)
        try:
            conn.connect()
            sock = conn.sock  # (the connection lets go of it once a "close" answer is read)
            conn.request(h.command, h.path, body=body or None, headers=headers)
            r = conn.getresponse()
            streaming = r.getheader("Content-Length") is None
            if not streaming:
                data = r.read()
        except OSError:
            conn.close()
            h.close_connection = True
            return
        try:
            out_headers = [(k, v) for k, v in r.getheaders() if k.lower() not in HOP]
            if page and r.status == 200 and "token=" not in h.path:
                try:
                    data, csp = self.build()
                except ValueError as e:
                    data, csp = f"web/embed.py: {e}\n".encode(), "default-src 'none'"
                out_headers = [(k, v) for k, v in out_headers
                               if k.lower() != "content-security-policy"]
                out_headers.append(("Content-Security-Policy", csp))
            h.send_response_only(r.status, r.reason)
            for k, v in out_headers:
                h.send_header(k, v)
            if streaming:
                h.send_header("Connection", "close")
                h.close_connection = True
                h.end_headers()
                h.wfile.flush()
                sock.settimeout(None)  # taed sends a comment line after 15 s of silence
                while True:
                    chunk = r.read1(65536)
                    if not chunk:
                        break
                    h.wfile.write(chunk)
                    h.wfile.flush()
            else:
                h.send_header("Content-Length", str(len(data)))
                h.end_headers()
                h.wfile.write(data)
        except OSError:
            h.close_connection = True
        finally:
            conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=8765,
                    help="the front's port (--web src; 0: a free one)")
    ap.add_argument("--home", help="TAE_HOME to use and keep (seeded unless it has experiments); "
                    "default: a temporary one, removed at exit")
    ap.add_argument("--bin", help="where taed and taectl are (default: build/bin)")
    ap.add_argument("--web", choices=["src", "embedded"], default="src",
                    help="src: serve web/src from the working tree; embedded: taed's own files")
    ap.add_argument("--live-minutes", type=float, default=60,
                    help="how long the live study keeps streaming (default 60)")
    a = ap.parse_args()

    def on_term(*_):
        raise KeyboardInterrupt
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started ignoring it
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    dev = DevTaed(a.bin, a.home, a.port, a.web, a.live_minutes)
    code = 1
    try:
        dev.start()
        with open(os.path.join(dev.home, "taed.pid")) as f:
            print(f"\ntaed {dev.taed_base} (pid {f.read().strip()}), TAE_HOME={dev.home}")
        print(f"  taectl: {dev.bin}/taectl --home {dev.home} ls")
        print(f"  its log: {dev.home}/logs/taed.log")
        if a.web == "src":
            print("  web/src is served from the working tree: reload the page to see an edit")
        stops = "stops taed" if dev.ours else "leaves taed running (it was up before)"
        print(f"\n{dev.url}\n\nCtrl-C {stops}{' and removes the home' if dev.temp else ''}.",
              flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("\nstopping...", flush=True)
        code = 0
    except (DevError, OSError, subprocess.TimeoutExpired) as e:
        print(f"dev_taed.py: {e}", file=sys.stderr)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # a second Ctrl-C waits too
            signal.signal(sig, signal.SIG_IGN)
        dev.stop()
    sys.exit(code)


if __name__ == "__main__":
    main()
