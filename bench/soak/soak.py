#!/usr/bin/env python3
"""taed for hours under churn (docs/reliability.md, "A long soak"): does anything grow that would
fill memory or the disk over months?

usage: soak.py BIN_DIR [--hours H] [--sample S] [--out DIR]

A fresh TAE_HOME with `taectl up --agents 2 --slots 2`, then until H hours have passed:
  - a study every 15 s: 3 variants x 2 seeds of a shell job that prints 30 key=value points at
    0.1 s, writes a 4 KiB checkpoint and marks it (a JSON line on TAE_METRICS_FD) at steps 10
    and 20 (taed keeps each run's last two), and exits 1
    for one seed in five; every 4th study is cancelled 4 s after it is submitted;
  - every 5 minutes one local agent is killed with SIGKILL (taed starts it again);
  - the dashboard polled every 2 s (the experiments list and the newest study's curve);
  - a stranger every second: 20 TCP connections to the agent port that send garbage, and 20
    dashboard requests without a session (401s).
Every S seconds it records taed's and local-0's RSS, open descriptors and threads, the database
and WAL sizes, the log directory's, the agents' work directories' and the checkpoint store's
sizes and the studies submitted, into DIR/soak.csv; at the end it
prints each figure's first and last value and its least-squares slope per hour over the second
half (after warm-up), and what that slope gives in 30 days. Runs niced beside other work.
"""
import argparse
import csv
import http.client
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from taed_client import Client, taectl  # noqa: E402  bench/taed_client.py

JOB = r"""#!/bin/sh
# $1: seed. 30 points, a checkpoint (4 KiB) marked at steps 10 and 20, one seed in five fails.
mkdir -p "$TAE_CHECKPOINT_DIR"
i=1
while [ $i -le 30 ]; do
  echo "step=$i loss=$(awk "BEGIN { print 2.0 / $i + $1 / 100 }")"
  if [ $i -eq 10 ] || [ $i -eq 20 ]; then
    head -c 4096 /dev/urandom > "$TAE_CHECKPOINT_DIR/state.bin"
    eval "echo '{\"checkpoint\": {\"step\": $i, \"time\": '$(date +%s.%N)'}}' >&$TAE_METRICS_FD"
  fi
  sleep 0.1
  i=$((i + 1))
done
[ $(( $1 % 5 )) -eq 4 ] && exit 1
exit 0
"""

SPEC = """name = "soak-{n}"
[train]
seeds = [{s0}, {s1}]
[params]
width = 1
[[ablation]]
name = "wide"
"params.width" = 2
[[ablation]]
name = "wider"
"params.width" = 3
[resources]
max_attempts = 1
[job]
code = "job"
command = "sh job.sh {{train.seed}}"
"""


def proc_figures(pid):
    out = {"rss_mb": float("nan"), "fds": float("nan"), "threads": float("nan")}
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                out["rss_mb"] = int(line.split()[1]) / 1024.0
            elif line.startswith("Threads:"):
                out["threads"] = int(line.split()[1])
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        pass
    return out


def find_agent(agent_id):
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"tae-agent") and agent_id.encode() in cmd:
            return int(entry)
    return None


def size_mb(path):
    try:
        if os.path.isdir(path):
            return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path)
                       for f in fs) / 1e6
        return os.path.getsize(path) / 1e6
    except OSError:
        return 0.0


def slope_per_hour(ts, ys):
    pts = [(t, y) for t, y in zip(ts, ys) if y == y]
    if len(pts) < 3:
        return float("nan")
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    my = sum(y for _, y in pts) / n
    var = sum((t - mt) ** 2 for t, _ in pts)
    return 0.0 if var == 0 else sum((t - mt) * (y - my) for t, y in pts) / var * 3600.0


def stranger(agent_addr, http_addr):
    host, port = agent_addr.rsplit(":", 1)
    for _ in range(20):
        try:
            with socket.create_connection((host, int(port)), timeout=1) as s:
                s.sendall(os.urandom(64))
        except OSError:
            pass
    h, p = http_addr.rsplit(":", 1)
    for _ in range(20):
        try:
            c = http.client.HTTPConnection(h, int(p), timeout=2)
            c.request("GET", "/api/experiments")
            c.getresponse().read()
            c.close()
        except (OSError, http.client.HTTPException):
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--sample", type=float, default=30.0)
    ap.add_argument("--out", default="soak-out")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    home = tempfile.mkdtemp(prefix="tae-soak-")
    work = os.path.join(home, "studies")
    os.makedirs(os.path.join(work, "job"))
    with open(os.path.join(work, "job", "job.sh"), "w") as f:
        f.write(JOB)
    rng = random.Random(7)
    taectl(args.bin_dir, home, "up", "--agents", "2", "--slots", "2", timeout=300)
    rows = []
    try:
        client = Client(taectl(args.bin_dir, home, "ui").strip(), timeout=120)
        agent_addr = open(os.path.join(home, "agent.addr")).read().split()[0]
        http_addr = open(os.path.join(home, "http.addr")).read().split()[0]
        http_addr = http_addr.split("//")[-1]
        start = time.monotonic()
        end = start + args.hours * 3600
        next_study = next_sample = next_poll = next_stranger = start
        next_kill = start + 300
        cancels = []
        n = 0
        newest = None
        with open(os.path.join(args.out, "soak.csv"), "w", newline="") as out:
            writer = None
            while time.monotonic() < end:
                now = time.monotonic()
                if now >= next_study:
                    n += 1
                    path = os.path.join(work, f"soak-{n}.toml")
                    with open(path, "w") as f:
                        f.write(SPEC.format(n=n, s0=2 * n, s1=2 * n + 1))
                    p = subprocess.run([os.path.join(args.bin_dir, "taectl"), "--home", home,
                                        "submit", path, "--json"], capture_output=True, text=True)
                    if p.returncode == 0:
                        newest = f"soak-{n}"
                        if n % 4 == 0:
                            cancels.append((now + 4, newest))
                    next_study += 15
                for due, name in list(cancels):
                    if now >= due:
                        subprocess.run([os.path.join(args.bin_dir, "taectl"), "--home", home,
                                        "cancel", name], capture_output=True)
                        cancels.remove((due, name))
                if now >= next_kill:
                    pid = find_agent(f"local-{rng.randrange(2)}")
                    if pid:
                        os.kill(pid, signal.SIGKILL)
                    next_kill += 300
                if now >= next_poll:
                    try:
                        client.get("/api/experiments")
                        if newest:
                            client.get(f"/api/experiments/{newest}/curves?metric=loss&width=300")
                    except SystemExit:
                        client = Client(taectl(args.bin_dir, home, "ui").strip(), timeout=120)
                    next_poll += 2
                if now >= next_stranger:
                    stranger(agent_addr, http_addr)
                    next_stranger += 1
                if now >= next_sample:
                    taed_pid = int(open(os.path.join(home, "taed.pid")).read().split()[0])
                    t = proc_figures(taed_pid)
                    a = proc_figures(find_agent("local-0") or 0)
                    db = os.path.join(home, "tae.db")
                    row = {"seconds": round(now - start, 1),
                           "taed_rss_mb": t["rss_mb"], "taed_fds": t["fds"],
                           "taed_threads": t["threads"],
                           "agent_rss_mb": a["rss_mb"], "agent_fds": a["fds"],
                           "agent_threads": a["threads"],
                           "db_mb": size_mb(db), "wal_mb": size_mb(db + "-wal"),
                           "logs_mb": size_mb(os.path.join(home, "logs")),
                           "agent_dirs_mb": size_mb(os.path.join(home, "agents")),
                           "checkpoints_mb": size_mb(os.path.join(home, "checkpoints")),
                           "studies": n}
                    rows.append(row)
                    if writer is None:
                        writer = csv.DictWriter(out, fieldnames=list(row))
                        writer.writeheader()
                    writer.writerow(row)
                    out.flush()
                    print(f"soak: {row['seconds'] / 60:.0f} min: taed {t['rss_mb']:.0f} MB, "
                          f"{t['fds']} fds, {t['threads']} threads; db {row['db_mb']:.1f} MB, "
                          f"wal {row['wal_mb']:.1f} MB, logs {row['logs_mb']:.2f} MB; {n} studies",
                          file=sys.stderr, flush=True)
                    next_sample += args.sample
                time.sleep(0.2)
    finally:
        subprocess.run([os.path.join(args.bin_dir, "taectl"), "--home", home, "down"],
                       capture_output=True, timeout=300)
        shutil.rmtree(home, ignore_errors=True)
    half = rows[len(rows) // 2:]
    ts = [r["seconds"] for r in half]
    print(f"\nsoak: {rows[-1]['seconds'] / 3600:.2f} h, {rows[-1]['studies']} studies "
          f"({rows[-1]['studies'] * 6} runs); slope over the second half, per hour, and in 30 days\n")
    print(f"{'':<16} {'first':>10} {'last':>10} {'per hour':>12} {'30 days':>12}")
    for key in rows[0]:
        if key in ("seconds", "studies"):
            continue
        s = slope_per_hour(ts, [r[key] for r in half])
        print(f"{key:<16} {rows[0][key]:>10.2f} {rows[-1][key]:>10.2f} {s:>12.3f} "
              f"{rows[-1][key] + s * 24 * 30:>12.1f}")


if __name__ == "__main__":
    main()
