#!/usr/bin/env python3
"""The morning after a reboot: the first curve and the first history() of one metric of the
10,000-run study on a cold page cache (bench/README.md, "Cold reads").

usage: cold_bench.py BIN_DIR PYTHON_DIR BUILD_PYTHON_DIR DATA_DIR [--rounds N] [--metric M]
                     [--pretouch GB]

DATA_DIR is a TAE_HOME with the study "query-big" (tae-metrics-bench dataset --big-runs 10000
--big-variants 100 --steps 1000). Needs root: before each measurement taed is stopped, the page
cache dropped (sync; /proc/sys/vm/drop_caches) and taed started again with no agents; then one
first request is timed from outside:
  - curve:     GET /api/experiments/ID/curves?metric=M&width=1000 (the dashboard's first curve)
  - history(): a fresh python3 with an empty local cache: tae.connect().experiment(...).history(M)
  - warm:      each again at once (taed's caches dropped by a restart, the page cache kept)
--pretouch GB: right before each timed read, a process writes GB of memory and exits, so that
the memory the read lands in has been touched lately. On a VM whose host backs guest memory on
first touch and takes freed memory back within seconds (free page reporting), memory that was
not touched lately costs ~1-3 ms a MB to touch (400 MB of numpy.ones: 1.0-1.4 s, against 0.05 s
right after): with it, the figures are the disk's and the code's, not the VM's.
Before the rounds it waits until taed has written the study's column files (store/column_file.h,
nothing to wait for where they are written or where this taed has none), so the figures are those
of a study that ended a while ago. Median and slowest of --rounds, printed with the disk's size.
"""
import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from taed_client import Client, drop_caches, taectl, timed  # noqa: E402  bench/taed_client.py

HISTORY = """
import sys, time, tae
t0 = time.perf_counter()
frame = tae.connect().experiment("query-big").history(sys.argv[1])
print("TIMING", time.perf_counter() - t0, len(frame))
"""

PRETOUCH = """
import sys
n = int(sys.argv[1])
b = bytearray(n)  # calloc'd: untouched until written
b[::4096] = b"\\x01" * len(range(0, n, 4096))
"""


def columns_written(home):
    """How many column files taed has recorded (0 where the table does not exist)."""
    try:
        db = sqlite3.connect(f"file:{os.path.join(home, 'tae.db')}?mode=ro", uri=True, timeout=30)
        try:
            return db.execute("SELECT COUNT(*) FROM metric_columns").fetchone()[0]
        finally:
            db.close()
    except sqlite3.OperationalError:
        return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("python_dir")
    ap.add_argument("build_python_dir")
    ap.add_argument("data_dir")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--metric", default="train/loss")
    ap.add_argument("--pretouch", type=float, default=0,
                    help="GB of memory touched after each drop of the page cache")
    ap.add_argument("--settle", type=float, default=600,
                    help="seconds to wait at most for the column files")
    args = ap.parse_args()
    home = args.data_dir
    for stale in ("taed.pid", "taed.sock"):
        if os.path.exists(os.path.join(home, stale)):
            os.remove(os.path.join(home, stale))
    env = dict(os.environ, TAE_HOME=home,
               PYTHONPATH=os.pathsep.join([args.python_dir, args.build_python_dir]))
    q = args.metric.replace("/", "%2F")
    results = {}

    def pretouch():
        if args.pretouch > 0:
            subprocess.run(["/usr/bin/python3", "-c", PRETOUCH, str(int(args.pretouch * 2**30))],
                           check=True)

    def up(touch=False):
        taectl(args.bin_dir, home, "up", "--agents", "0", timeout=600)
        if touch:
            pretouch()  # before the connection is made: taed closes one left idle
        return Client(taectl(args.bin_dir, home, "ui").strip(), timeout=600)

    def curve(client, exp_id):
        return timed(lambda: client.get(f"/api/experiments/{exp_id}/curves?metric={q}"
                                        "&width=1000"))[0]

    def history():
        pretouch()
        with tempfile.TemporaryDirectory(prefix="tae-cold-cache-") as cache:
            p = subprocess.run(["/usr/bin/python3", "-c", HISTORY, args.metric],
                               capture_output=True, text=True, timeout=1800,
                               env=dict(env, XDG_CACHE_HOME=cache))
        if p.returncode != 0:
            sys.exit(f"cold_bench: history() failed:\n{p.stderr[-2000:]}")
        _, seconds, rows = p.stdout.strip().splitlines()[-1].split()
        return float(seconds), int(rows)

    client = up()
    try:
        import json
        exp_id = json.loads(client.get("/api/experiments/query-big"))["id"]
        start = time.monotonic()
        last, steady = -1, 0
        while time.monotonic() - start < args.settle:  # until the count stops changing
            n = columns_written(home)
            steady = steady + 1 if n == last else 0
            if steady >= 5:
                break
            last = n
            time.sleep(2)
        print(f"cold_bench: {columns_written(home)} column files recorded after "
              f"{time.monotonic() - start:.0f} s", file=sys.stderr)
        for r in range(args.rounds):
            for label in ("curve", "history()"):
                taectl(args.bin_dir, home, "down", timeout=120)
                drop_caches()
                client = up(touch=label == "curve")
                if label == "curve":
                    cold = curve(client, exp_id)
                    taectl(args.bin_dir, home, "down", timeout=120)
                    client = up(touch=True)
                    warm = curve(client, exp_id)
                    rows = None
                else:
                    cold, rows = history()
                    warm, _ = history()
                results.setdefault(f"{label} cold", []).append(cold)
                results.setdefault(f"{label} warm", []).append(warm)
                print(f"  round {r + 1}: {label}: cold {cold:.2f} s, warm {warm:.2f} s"
                      + (f", {rows:,} rows" if rows else ""), file=sys.stderr)
    finally:
        subprocess.run([os.path.join(args.bin_dir, "taectl"), "--home", home, "down"],
                       capture_output=True, timeout=120)
    size = os.path.getsize(os.path.join(home, "tae.db")) / 1e9
    print(f"\ncold_bench: query-big, {args.metric}; store {size:.1f} GB; median (slowest) of "
          f"{args.rounds}" + (f"; {args.pretouch:g} GB touched after each drop" if args.pretouch
                              else "") + "\n")
    for label, values in results.items():
        print(f"{label:<24} {statistics.median(values):8.2f} s  ({max(values):.2f} s)")


if __name__ == "__main__":
    main()
