#!/usr/bin/env python3
"""A lab's history: taed on the 30,000-run data set (bench/README.md, "Scale").

usage: scale_bench.py BIN_DIR DATA_DIR [--rounds N]

DATA_DIR is a TAE_HOME made by `tae-metrics-bench dataset --big-runs 10000 --big-variants 100
--steps 1000 --small-experiments 2000` (one 10,000-run study "query-big" of 100 variants x 100
seeds, 2,000 studies of 10 runs, ~200 million points, every run finished). taed is started on it
as it is (nothing here writes to it) and timed from outside, median of --rounds:

- `taectl ls`, `taectl report query-big`, `taectl runs query-big` (its first page), each process
  start to exit, beside `taectl agents` (process start plus one small RPC: the floor);
- the dashboard's first page of the study's runs (GET /api/experiments/query-big/runs);
- the study's curves: the first answer for each of its metrics (read from SQLite) and the same
  request again (cached), and taed's resident memory after all of them. A first answer comes
  once per taed, so taed is started again for each of --curve-rounds rounds (every metric in
  the same order each time) and each metric's first curve is the median over them; the slowest
  single one is printed beside it.

The data set's file is read through once before taed starts, so the operating system's page
cache holds it as on a workstation where the data set is in use (pass --cold to skip that, and
time what a freshly booted machine sees); taed's own caches start empty.

Every figure is printed against its goal (issue "A lab's queue and a lab's history").
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from taed_client import Client, taectl, taed_status_mb, timed  # noqa: E402  bench/taed_client.py


def row(label, ms, goal_ms, extra=""):
    met = "-" if goal_ms is None else ("met" if ms < goal_ms else "NOT met")
    goal = "-" if goal_ms is None else f"< {goal_ms:g} ms"
    print(f"{label:<52} {ms:10.1f} {goal:>12}  {met:<8} {extra}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("data_dir")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--curve-rounds", type=int, default=3,
                    help="taed starts whose first curves are timed (median per metric)")
    ap.add_argument("--cold", action="store_true", help="do not read the data set through first")
    args = ap.parse_args()
    home = args.data_dir
    if not args.cold:
        print("scale: reading the data set through (the page cache warm)...", file=sys.stderr)
        with open(os.path.join(home, "tae.db"), "rb") as f:
            while f.read(1 << 24):
                pass
    for stale in ("taed.pid", "taed.sock"):
        if os.path.exists(os.path.join(home, stale)):
            os.remove(os.path.join(home, stale))
    print("scale: starting taed on the data set...", file=sys.stderr)
    up_s, _ = timed(lambda: taectl(args.bin_dir, home, "up", "--agents", "0", timeout=600))
    try:
        url = taectl(args.bin_dir, home, "ui")
        client = Client(url.strip(), timeout=300)
        rss_start = taed_status_mb(home, "VmRSS")
        body = client.get("/api/experiments/query-big")
        exp = json.loads(body)
        exp_id = exp["id"]
        total_runs = exp["counts"]["total"]
        body = client.get(f"/api/experiments/{exp_id}/metrics")
        metrics = json.loads(body)["metrics"]
        listing = taectl(args.bin_dir, home, "ls", "--json")
        experiments = len(json.loads(listing))

        commands = [
            ("taectl ls", ["ls"], 100),
            ("taectl report query-big", ["report", "query-big"], 100),
            ("taectl runs query-big (first page)", ["runs", "query-big"], 100),
            ("taectl agents (floor: start + 1 small RPC)", ["agents"], None),
        ]
        times = {c[0]: [] for c in commands}
        page = []
        for r in range(args.rounds + 1):  # round 0 warms the page cache, untimed
            for i in range(len(commands)):
                label, argv, _ = commands[(i + r) % len(commands)]
                took, _ = timed(lambda: taectl(args.bin_dir, home, *argv))
                if r > 0:
                    times[label].append(took * 1000)
            took, body = timed(lambda: client.get(f"/api/experiments/{exp_id}/runs?limit=100"))
            if r > 0:
                page.append(took * 1000)
            print(f"  round {r}/{args.rounds}", file=sys.stderr)
        shown = len(json.loads(body)["runs"])

        # Curves: every metric of the largest study, first (from SQLite) then again (cached), in
        # each of --curve-rounds taed starts (the first round's taed is the one above).
        firsts = {metric: [] for metric in metrics}
        cached = {}
        sizes = {}
        for c in range(args.curve_rounds):
            if c > 0:
                taectl(args.bin_dir, home, "down", timeout=120)
                taectl(args.bin_dir, home, "up", "--agents", "0", timeout=600)
                client = Client(taectl(args.bin_dir, home, "ui").strip(), timeout=300)
            for metric in metrics:
                q = metric.replace("/", "%2F")
                path = f"/api/experiments/{exp_id}/curves?metric={q}&width=1000"
                first, body = timed(lambda: client.get(path))
                firsts[metric].append(first * 1000)
                sizes[metric] = len(body)
                if c == 0:
                    cached[metric] = 1000 * statistics.median(
                        timed(lambda: client.get(path))[0] for _ in range(args.rounds))
                print(f"  {metric}: first {first * 1000:.0f} ms (start {c + 1}/{args.curve_rounds})",
                      file=sys.stderr)
            if c == 0:
                rss_end = taed_status_mb(home, "VmRSS")
                hwm = taed_status_mb(home, "VmHWM")
        curves = [(m, statistics.median(firsts[m]), cached[m], sizes[m]) for m in metrics]
        worst_single = max((t, m) for m in metrics for t in firsts[m])
    finally:
        subprocess.run([os.path.join(args.bin_dir, "taectl"), "--home", home, "down"],
                       capture_output=True, timeout=120)

    cache = "cold page cache" if args.cold else "warm page cache, taed's caches empty"
    print(f"\nscale: {experiments} experiments, query-big {total_runs} runs, "
          f"{len(metrics)} metrics; taed up in {up_s:.1f} s; {cache}; median of {args.rounds}\n")
    print(f"{'':<52} {'ms':>10} {'goal':>12}  {'':<8}")
    for label, _, goal in commands:
        row(label, statistics.median(times[label]), goal)
    row(f"GET .../runs?limit=100 ({shown} of {total_runs} runs)", statistics.median(page), 100)
    drawn = [c for c in curves if c[0] in ("train/loss", "eval/loss")] or curves[:1]
    for metric, first, again, size in drawn:
        row(f"first curve of query-big, {metric}", first, 500,
            f"{size / 1e6:.2f} MB, median of {args.curve_rounds} starts")
        row(f"cached curve of query-big, {metric}", again, 50)
    worst = max(curves, key=lambda c: c[1])
    row(f"slowest first curve ({worst[0]})", worst[1], 500,
        f"median; slowest single {worst_single[0]:.0f} ms ({worst_single[1]})")
    worst_cached = max(curves, key=lambda c: c[2])
    row(f"slowest cached curve ({worst_cached[0]})", worst_cached[2], 50)
    print(f"{'taed RSS at start / after curves of all ' + str(len(curves)) + ' metrics':<52} "
          f"{rss_start:7.0f} MB / {rss_end:.0f} MB (peak {hwm:.0f} MB)   goal < 1024 MB: "
          f"{'met' if hwm < 1024 else 'NOT met'}")


if __name__ == "__main__":
    main()
