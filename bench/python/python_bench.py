#!/usr/bin/env python3
"""The `tae` library at a lab's scale (bench/README.md, "The tae library"): the 10,000-run study
of the scale data set into pandas through the library, against what a notebook did before, in
the same run.

usage: python_bench.py BIN_DIR PYTHON_DIR BUILD_PYTHON_DIR DATA_DIR [--rounds N] [--cold]

DATA_DIR is a TAE_HOME with the study "query-big" (tae-metrics-bench dataset --big-runs 10000
--big-variants 100 --steps 1000). taed is started on it with no agents. Each measurement runs in
a fresh python3 process (its wall time from start to the frame, its peak RSS from getrusage), the
median of --rounds:
  - runs():                 tae's, against `taectl runs query-big --json` + pandas.json_normalize
  - history("train/loss"):  tae's (no local cache: a first read), against `taectl export
                            query-big --format csv --metric train/loss` + pandas.read_csv
  - history again:          a second process with the local cache of the first (ended runs are
                            never fetched twice)
With --cold the page cache is dropped (root: /proc/sys/vm/drop_caches) and taed started afresh
before each first history(), the morning after a reboot; the figure is printed as measured.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from taed_client import drop_caches, taectl  # noqa: E402  bench/taed_client.py

TAE_RUNS = """
import sys, tae
e = tae.connect().experiment("query-big")
frame = e.runs()
print(len(frame), frame.shape[1])
"""
TAE_HISTORY = """
import sys, tae
e = tae.connect().experiment("query-big")
frame = e.history("train/loss")
print(len(frame), frame.shape[1])
"""
CLI_RUNS = """
import json, subprocess, sys
import pandas as pd
out = subprocess.run([sys.argv[1], "--home", sys.argv[2], "runs", "query-big", "--json",
                      "--limit", "0"], capture_output=True, text=True, check=True).stdout
data = json.loads(out)
data = data["runs"] if isinstance(data, dict) else data
frame = pd.json_normalize(data)
print(len(frame), frame.shape[1])
"""
CLI_HISTORY = """
import io, subprocess, sys
import pandas as pd
out = subprocess.run([sys.argv[1], "--home", sys.argv[2], "export", "query-big", "--format",
                      "csv", "--metric", "train/loss"], capture_output=True, check=True).stdout
frame = pd.read_csv(io.BytesIO(out))
print(len(frame), frame.shape[1])
"""
WRAP = """
import resource, time
t0 = time.perf_counter()
{body}
import resource
print("TIMING", time.perf_counter() - t0,
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0)
"""


def measure(code, env, args):
    p = subprocess.run(["/usr/bin/python3", "-c", WRAP.format(body=code), *args],
                       capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode != 0:
        sys.exit(f"python_bench: a measurement failed:\n{p.stderr[-2000:]}")
    lines = p.stdout.strip().splitlines()
    rows, cols = lines[-2].split()
    _, seconds, self_mb, child_mb = lines[-1].split()
    return float(seconds), float(self_mb), float(child_mb), int(rows), int(cols)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("python_dir")
    ap.add_argument("build_python_dir")
    ap.add_argument("data_dir")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cold", action="store_true")
    args = ap.parse_args()
    home = args.data_dir
    taectl_bin = os.path.join(args.bin_dir, "taectl")
    for stale in ("taed.pid", "taed.sock"):
        if os.path.exists(os.path.join(home, stale)):
            os.remove(os.path.join(home, stale))
    cache = tempfile.mkdtemp(prefix="tae-bench-cache-")
    env = dict(os.environ, TAE_HOME=home, XDG_CACHE_HOME=cache,
               PYTHONPATH=os.pathsep.join([args.python_dir, args.build_python_dir]))
    results = {}

    def record(label, value):
        results.setdefault(label, []).append(value)

    print("python_bench: the page cache warm: reading the data set through...", file=sys.stderr)
    with open(os.path.join(home, "tae.db"), "rb") as f:
        while f.read(1 << 24):
            pass
    taectl(args.bin_dir, home, "up", "--agents", "0", timeout=600)
    try:
        for r in range(args.rounds + 1):  # round 0 warms taed's caches, untimed
            shutil.rmtree(cache, ignore_errors=True)
            os.makedirs(cache)
            for label, code in (("runs(): tae", TAE_RUNS),
                                ("runs(): taectl runs --json + json_normalize", CLI_RUNS),
                                ("history(train/loss): tae, first read", TAE_HISTORY),
                                ("history(train/loss): tae, from the local cache", TAE_HISTORY),
                                ("history(train/loss): taectl export csv + read_csv",
                                 CLI_HISTORY)):
                got = measure(code, env, [taectl_bin, home])
                if r > 0:
                    record(label, got)
                print(f"  round {r}: {label}: {got[0]:.2f} s, {got[3]:,} rows", file=sys.stderr)
        if args.cold:
            for r in range(args.rounds):
                taectl(args.bin_dir, home, "down", timeout=120)
                drop_caches()
                taectl(args.bin_dir, home, "up", "--agents", "0", timeout=600)
                shutil.rmtree(cache, ignore_errors=True)
                os.makedirs(cache)
                got = measure(TAE_HISTORY, env, [taectl_bin, home])
                record("history(train/loss): tae, cold page cache, fresh taed", got)
                print(f"  cold {r}: {got[0]:.2f} s", file=sys.stderr)
    finally:
        subprocess.run([taectl_bin, "--home", home, "down"], capture_output=True, timeout=120)
        shutil.rmtree(cache, ignore_errors=True)

    print(f"\npython_bench: query-big, median of {args.rounds}; wall time of a fresh python3 from"
          " start to the frame; peak RSS of python3 (and of its taectl child)\n")
    print(f"{'':<56} {'s':>8} {'python MB':>10} {'taectl MB':>10} {'rows':>12}")
    med = {}
    for label, values in results.items():
        s = statistics.median(v[0] for v in values)
        med[label] = s
        mb = statistics.median(v[1] for v in values)
        child = statistics.median(v[2] for v in values)
        print(f"{label:<56} {s:8.2f} {mb:10.0f} {child:10.0f} {values[0][3]:12,}")
    print()
    for what, mine, ref in (
            ("runs()", "runs(): tae", "runs(): taectl runs --json + json_normalize"),
            ("history(), first read", "history(train/loss): tae, first read",
             "history(train/loss): taectl export csv + read_csv"),
            ("history(), cached", "history(train/loss): tae, from the local cache",
             "history(train/loss): taectl export csv + read_csv")):
        ratio = med[ref] / med[mine]
        print(f"{what:<28} {ratio:6.1f}x faster than the reference (goal >= 3x: "
              f"{'met' if ratio >= 3 else 'NOT met'})")


if __name__ == "__main__":
    main()
