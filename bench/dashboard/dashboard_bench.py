#!/usr/bin/env python3
"""The dashboard against 1,000 runs x 10,000 points (bench/README.md, "Dashboard").

usage: dashboard_bench.py BIN_DIR DATA_DIR [--rounds N]

DATA_DIR is a TAE_HOME made by `tae-metrics-bench dataset --big-variants 50` (the query
benchmark's data set with a 50-variant x 10-seed experiment "query-big"). Every figure is printed
with a reference measured in the same invocation:

1. taed's answer to a curve request (50 variants, bands over seeds, 2,000 buckets): uncached
   and cached, against fetching the same data as one line per run (500 per-run requests).
2. First render in headless Chromium (in the page, from the route change to the drawn view):
   the ablation table against a 500-row table of the runs; the 50-variant curves view against
   uPlot drawing the same metric as one line per run (500 series).
3. New-point-to-screen latency: a live job writes a point every 100 ms; the time from taed
   storing a point to the chart showing it.
4. taed's resident memory with 20 open dashboards (curves views with their live streams)
   against the same taed with none.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from taed_client import Client, rss_mb, taectl, timed  # noqa: E402  bench/taed_client.py

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def driver(profile):
    o = webdriver.ChromeOptions()
    o.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 f"--user-data-dir={profile}", "--window-size=1400,900"):
        o.add_argument(flag)
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=o)
    d.set_script_timeout(300)
    return d


# In the page: go to a route and resolve when `css` matches (checked every animation frame).
ROUTE_JS = """
const [route, css, done] = arguments;
const t0 = performance.now();
location.hash = route;
(function check() {
  if (document.querySelector(css)) {
    requestAnimationFrame(() => done(performance.now() - t0));
  } else {
    requestAnimationFrame(check);
  }
})();
"""

# The references, in the same page: the same data as one line per run.
RUNS_TABLE_JS = """
const [exp, done] = arguments;
const t0 = performance.now();
location.hash = '#/fleet';
fetch(`/api/experiments/${exp}/runs`).then(r => r.json()).then(({runs}) => {
  const table = document.createElement('table');
  for (const run of runs) {
    const tr = table.insertRow();
    for (const v of [run.id, run.variant, run.seed, run.state, run.final_metrics['eval/loss'],
                     run.final_metrics['eval/acc']]) tr.insertCell().textContent = v;
  }
  document.body.append(table);
  requestAnimationFrame(() => { const t = performance.now() - t0; table.remove(); done(t); });
});
"""

PER_RUN_CURVES_JS = """
const [exp, metric, done] = arguments;
const t0 = performance.now();
location.hash = '#/fleet';
Promise.all([import('uplot'), fetch(`/api/experiments/${exp}/runs`).then(r => r.json())])
.then(async ([mod, {runs}]) => {
  const uPlot = mod.default;
  const series = await Promise.all(runs.map(run =>
    fetch(`/api/runs/${run.id}/series?metric=${encodeURIComponent(metric)}&width=1000`)
      .then(r => r.json())));
  // uPlot's aligned data: one x, one y column per run (null where a run has no point).
  const xs = [...new Set(series.flatMap(s => s.x))].sort((a, b) => a - b);
  const at = new Map(xs.map((x, i) => [x, i]));
  const data = [xs];
  for (const s of series) {
    const col = new Array(xs.length).fill(null);
    s.x.forEach((x, i) => { col[at.get(x)] = s.value[i]; });
    data.push(col);
  }
  const div = document.createElement('div');
  document.body.append(div);
  const u = new uPlot({width: 1200, height: 500, series: [{}, ...series.map(() => ({stroke: '#36c'}))],
                       legend: {show: false}}, data, div);
  requestAnimationFrame(() => { const t = performance.now() - t0; u.destroy(); div.remove(); done(t); });
});
"""


def median(xs):
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("data_dir")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tae-dash-bench-", dir=os.path.dirname(os.path.abspath(args.data_dir)))
    drivers = []
    # A copy: the live job's experiment must not change the data set for the next invocation.
    home = os.path.join(tmp, "home")
    subprocess.run(["cp", "-r", args.data_dir, home], check=True)
    for stale in ("taed.pid", "taed.sock"):
        if os.path.exists(os.path.join(home, stale)):
            os.remove(os.path.join(home, stale))
    try:
        print("dashboard_bench: starting taed on the data set...", file=sys.stderr)
        taectl(args.bin_dir, home, "up", "--agents", "0", timeout=300)
        url = taectl(args.bin_dir, home, "ui").strip()
        client = Client(url)
        rss_start = rss_mb(home)
        exp = json.loads(client.get("/api/experiments/query-big"))
        runs = exp["counts"]["total"]
        variants = len(exp["variants"])
        print(f"query-big: {variants} variants, {runs} runs", file=sys.stderr)

        # 1. taed's answer to a curve request.
        results = []
        for metric in ("train/loss", "eval/loss"):
            q = metric.replace("/", "%2F")
            cold, warm, ref = [], [], []
            # The first request reads the series from SQLite; later ones find them in memory
            # (server/http/series_cache.h) and compute the answer again.
            first, _ = timed(lambda: client.get(f"/api/experiments/query-big/curves?metric={q}&width=999"))
            for r in range(args.rounds):
                # A width of its own per round: a cache miss every time.
                t, body = timed(lambda: client.get(
                    f"/api/experiments/query-big/curves?metric={q}&width={1000 + r}"))
                cold.append(t)
                t, _ = timed(lambda: client.get(
                    f"/api/experiments/query-big/curves?metric={q}&width={1000 + r}"))
                warm.append(t)
                run_ids = list(range(1, runs + 1))
                t, _ = timed(lambda: [client.get(f"/api/runs/{i}/series?metric={q}&width=1000")
                                      for i in run_ids])
                ref.append(t)
            c = json.loads(body)
            results.append((metric, len(c["x"]), len(c["variants"]), first, median(cold),
                            median(warm), median(ref)))

        # 2. First render in headless Chromium.
        d = driver(os.path.join(tmp, "p0"))
        drivers.append(d)
        d.get(url)
        d.find_element(By.TAG_NAME, "body")
        d.execute_async_script(ROUTE_JS, "#/", "table")
        render = {"table": [], "runs_table": [], "curves": [], "per_run": []}
        for r in range(args.rounds):
            d.execute_async_script(ROUTE_JS, "#/fleet", "table")
            render["table"].append(d.execute_async_script(
                ROUTE_JS, f"#/e/query-big?r={r}", "td[data-metric]"))
            render["runs_table"].append(d.execute_async_script(RUNS_TABLE_JS, "query-big"))
            d.execute_async_script(ROUTE_JS, "#/fleet", "table")
            render["curves"].append(d.execute_async_script(
                ROUTE_JS, f"#/e/query-big/curves?metric=train%2Floss&r={r}",
                "[data-x-len]:not([data-x-len='0'])"))
            render["per_run"].append(d.execute_async_script(
                PER_RUN_CURVES_JS, "query-big", "train/loss"))

        # 4. RSS with 20 open dashboards (before 3: the live job adds its own memory).
        d.execute_async_script(ROUTE_JS, "#/fleet", "table")
        idle = rss_mb(home)
        # Each dashboard in a browser of its own: one browser holds at most 6 connections to
        # taed, and a visible dashboard keeps its live streams open.
        for i in range(20):
            b = driver(os.path.join(tmp, f"dash{i}"))
            drivers.append(b)
            b.get(url)
            b.get(url.split("/?")[0] + f"/#/e/query-big/curves?metric=eval%2Floss")
            t0 = time.monotonic()
            while not b.find_elements(By.CSS_SELECTOR, "[data-x-len]:not([data-x-len='0'])"):
                if time.monotonic() - t0 > 120:
                    sys.exit(f"dashboard {i + 1} did not draw its curves in 120 s")
                time.sleep(0.05)
        open20 = rss_mb(home)
        print("20 dashboards open", file=sys.stderr)

        # 3. New point to screen: a live job on this taed.
        taectl(args.bin_dir, home, "down", timeout=300)
        taectl(args.bin_dir, home, "up", "--agents", "1", timeout=300)
        client = Client(url)
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        with open(os.path.join(src, "live.py"), "w") as f:
            f.write("import time\nfor i in range(1, 3001):\n"
                    "    print(f'Step={i} Value={i % 7}', flush=True)\n    time.sleep(0.1)\n")
        with open(os.path.join(tmp, "live.toml"), "w") as f:
            f.write('name = "bench-live"\n[train]\nseeds = [0]\n[job]\ncode = "src"\n'
                    'command = "python3 -u live.py"\n')
        taectl(args.bin_dir, home, "submit", os.path.join(tmp, "live.toml"))
        for b in drivers[1:]:
            b.quit()
        del drivers[1:]
        d.get(url.split("/?")[0] + "/#/e/bench-live/curves?metric=Value")
        latencies = []
        deadline = time.monotonic() + 120
        while len(latencies) < 30 and time.monotonic() < deadline:
            try:
                shown = int(d.execute_script(
                    "const e = document.querySelector('[data-x-len]'); return e ? e.dataset.xLen : -1"))
            except Exception:
                shown = -1
            if shown < 1:
                time.sleep(0.05)
                continue
            while True:  # the moment taed holds a point the chart does not show
                c = json.loads(client.get("/api/experiments/bench-live/curves?metric=Value&width=1000"))
                if len(c["x"]) > shown:
                    break
            t0 = time.perf_counter()
            while int(d.execute_script(
                    "return document.querySelector('[data-x-len]').dataset.xLen")) < len(c["x"]):
                if time.perf_counter() - t0 > 5:
                    break
            latencies.append(time.perf_counter() - t0)

        # Report.
        print()
        print(f"dashboard, query-big: {variants} variants x {runs // max(variants, 1)} seeds "
              f"= {runs} runs; the data set holds 1,000 runs x 10,003 points")
        print()
        print("taed's answer to a curve request (medians of %d)" % args.rounds)
        print("  first: series read from SQLite; computed: series in memory, answer computed;")
        print("  cached: the same answer again; reference: the same data as 500 per-run requests")
        print(f"{'metric':12} {'points':>9} {'x':>6} {'first':>9} {'computed':>9} {'cached':>8} "
              f"{'reference':>10} {'ref/first':>10} {'ref/computed':>13}")
        for metric, xs, nv, first, cold, warm, ref in results:
            points = runs * (1500 if metric.startswith("train") else 250)
            print(f"{metric:12} {points:>9,} {xs:>6} {first * 1000:>7.0f}ms {cold * 1000:>7.1f}ms "
                  f"{warm * 1000:>6.1f}ms {ref * 1000:>8.0f}ms {ref / first:>9.1f}x {ref / cold:>12.1f}x")
        print()
        print("first render in headless Chromium, route change to drawn (medians of %d)" % args.rounds)
        for ours, ref, what, refwhat in (("table", "runs_table", "ablation table (50 rows)",
                                          "table of the 500 runs"),
                                         ("curves", "per_run", "curves, 50 bands",
                                          "uPlot, 500 lines (one per run)")):
            o, r = median(render[ours]), median(render[ref])
            print(f"  {what:28} {o:8.0f} ms   reference {refwhat:32} {r:8.0f} ms   ratio {r / o:5.1f}x")
        print()
        if latencies:
            lat = sorted(latencies)
            print(f"new point to screen (stored -> drawn), {len(lat)} points: median "
                  f"{median(lat) * 1000:.0f} ms, p90 {lat[int(len(lat) * 0.9) - 1] * 1000:.0f} ms, "
                  f"max {lat[-1] * 1000:.0f} ms (the core publishes every 100 ms, streams poll "
                  f"every 100 ms)")
        print(f"taed RSS: {rss_start:.0f} MB at start; {idle:.0f} MB after the requests above (series "
              f"in memory), no dashboard open; {open20:.0f} MB with 20 dashboards open "
              f"(x{open20 / idle:.2f}, {(open20 - idle) / 20 * 1024:+.0f} kB each)")
    finally:
        for d in drivers:
            try:
                d.quit()
            except Exception:
                pass
        subprocess.run([os.path.join(args.bin_dir, "taectl"), "--home", home, "down"],
                       capture_output=True, timeout=300)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
