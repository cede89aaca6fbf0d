#!/usr/bin/env bash
# Code snapshots: `taectl mount` against `rsync -a` (see bench/README.md).
#   bash bench/mount_bench.sh            # ~40 s on a quiet 2-core box, a few minutes on a busy one
#   BENCH_ROUNDS=9 bash bench/mount_bench.sh
# Generates a deterministic tree (10,000 files, ~200 MB of incompressible bytes) under a temporary
# directory, starts taed (no agents) on temporary TAE_HOMEs and times, BENCH_ROUNDS times each
# with TAE and rsync interleaved, three scenarios: cold, no-op and a one-file change. Prints the
# medians, their ratio against the targets, and checks the bytes taectl says it uploaded.
# Exit status: 0 when the benchmark ran and its checks passed (bytes uploaded, snapshot ids),
# whether or not the speed targets were met (the table says); 1 when a check failed or a command
# failed; 2 when rsync or python3 is missing or the arguments are wrong.
# Environment: BENCH_ROUNDS (default 5), BENCH_BUILD=0 (do not build taed/taectl first),
# TAE_BUILD_DIR (build), BENCH_TMP (parent of the temporary directory; default /tmp).
set -euo pipefail

cd "$(dirname "$0")/.."

if [ $# -gt 0 ]; then
  echo "usage: [BENCH_ROUNDS=N] bash bench/mount_bench.sh" >&2
  exit 2
fi
rounds="${BENCH_ROUNDS:-5}"
if ! [[ "$rounds" =~ ^[1-9][0-9]*$ ]]; then
  echo "mount_bench: BENCH_ROUNDS must be a positive integer" >&2
  exit 2
fi
if ! command -v rsync >/dev/null 2>&1; then
  echo "mount_bench: rsync is not installed: apt-get install rsync" >&2
  exit 2
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "mount_bench: python3 is not installed: apt-get install python3" >&2
  exit 2
fi

build="${TAE_BUILD_DIR:-build}"
if [ "${BENCH_BUILD:-1}" != 0 ]; then
  if [ ! -f "$build/build.ninja" ]; then
    echo "mount_bench: configuring $build..." >&2
    cmake -S . -B "$build" -G Ninja >/dev/null
  fi
  # 1 job: a shared 2-core box.
  echo "mount_bench: building taed, taectl (1 job)..." >&2
  cmake --build "$build" -j1 --target taed taectl >&2
fi
taectl="$(cd "$build/bin" && pwd)/taectl"
if [ ! -x "$taectl" ]; then
  echo "mount_bench: $taectl is missing" >&2
  exit 2
fi

tmp="$(mktemp -d "${BENCH_TMP:-/tmp}/tae-mount-bench.XXXXXX")"
cleanup() {
  # Every taed this run started lives in a TAE_HOME under $tmp.
  local home
  for home in "$tmp"/home-*; do
    if [ -f "$home/taed.pid" ]; then
      TAE_HOME="$home" "$taectl" down >/dev/null 2>&1 || true
    fi
  done
  echo "mount_bench: removing $tmp (up to $(((3 + 2 * rounds) * 10000)) files; slow on a busy box)..." >&2
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

TAECTL="$taectl" TMPROOT="$tmp" ROUNDS="$rounds" python3 - <<'PY'
import filecmp
import json
import os
import random
import statistics
import subprocess
import sys
import time

TAECTL = os.environ["TAECTL"]
TMP = os.environ["TMPROOT"]
ROUNDS = int(os.environ["ROUNDS"])
SRC = os.path.join(TMP, "src")
CHANGED = "d05/s05/f0050.py"  # the file the 1-file scenario rewrites
CHANGED_SIZE = 20 * 1024
T0 = time.perf_counter()


def log(*args):
    print(f"mount_bench: [{time.perf_counter() - T0:5.0f} s]", *args, file=sys.stderr, flush=True)


# --- 1. the tree ----------------------------------------------------------------------------
# 10 x 10 directories of 100 files each. 9,950 source-like files with log-normal sizes (median
# 4 KiB, 64 B to 256 KiB) and 50 binary ones of 0.5-5 MB scaled so that the tree is 200,000,000
# bytes. Contents are random bytes from a seeded PRNG (incompressible, no duplicates).
def generate():
    rng = random.Random(20261122)
    small_ext = [".py", ".cc", ".h", ".md", ".json", ".txt", ".yaml", ".sh"]
    paths = []
    for a in range(10):
        for b in range(10):
            for f in range(100):
                paths.append(f"d{a:02d}/s{b:02d}/f{f:04d}")
    big = set(rng.sample(range(len(paths)), 50))
    sizes = [0] * len(paths)
    names = [""] * len(paths)
    for i, p in enumerate(paths):
        if i in big:
            names[i] = p + ".bin"
        else:
            names[i] = p + rng.choice(small_ext)
            sizes[i] = int(min(262144, max(64, rng.lognormvariate(8.3178, 1.2))))  # ln 4096
    changed = paths.index(CHANGED[: -len(".py")])
    big.discard(changed)
    names[changed] = CHANGED
    sizes[changed] = CHANGED_SIZE
    small_total = sum(sizes)
    raw = {i: rng.uniform(0.5, 5.0) for i in big}
    scale = (200_000_000 - small_total) / sum(raw.values())
    for i in big:
        sizes[i] = int(raw[i] * scale)
    sizes[max(big)] += 200_000_000 - sum(sizes)
    for name, size in zip(names, sizes):
        path = os.path.join(SRC, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(rng.randbytes(size))
    return len(names), sum(sizes)


load_start = os.getloadavg()[0]
start = time.perf_counter()
nfiles, nbytes = generate()
log(f"generated {nfiles} files, {nbytes:,} bytes in {SRC} ({time.perf_counter() - start:.1f} s)")
changed_path = os.path.join(SRC, CHANGED)
assert os.path.getsize(changed_path) == CHANGED_SIZE


# --- helpers --------------------------------------------------------------------------------
def run(cmd, env=None, check=True):
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and proc.returncode != 0:
        log(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
        sys.exit(1)
    return proc


def timed(cmd, env=None):
    """Wall time in ms from spawn to exit, and stdout."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ms = (time.perf_counter() - t0) * 1000
    if proc.returncode != 0:
        log(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
        sys.exit(1)
    return ms, proc.stdout


def home_env(home):
    env = dict(os.environ)
    env["TAE_HOME"] = home
    return env


def up(home):
    os.makedirs(home, exist_ok=True)
    run([TAECTL, "up", "--agents", "0"], env=home_env(home))


def down(home):
    run([TAECTL, "down"], env=home_env(home), check=False)


def mount(home):
    ms, out = timed([TAECTL, "mount", SRC, "--json"], env=home_env(home))
    return ms, json.loads(out)


def rsync(dest):
    ms, _ = timed(["rsync", "-a", SRC + "/", dest + "/"])
    return ms


def settle():
    # Write back what the last step left dirty (200 MB after a cold copy) so that it is not
    # charged to the next timed step, whichever program that is.
    subprocess.run(["sync"])


change_rng = random.Random(7)


def change_file():
    # New random content, same size: only mtime/ctime tell the hash cache (and rsync) it changed.
    with open(changed_path, "r+b") as f:
        f.write(change_rng.randbytes(CHANGED_SIZE))


# --- 2. the warm side: one taed and one rsync destination that hold the tree -----------------
warm_home = os.path.join(TMP, "home-warm")
warm_dest = os.path.join(TMP, "dest-warm")
log("setup: taed on a TAE_HOME for the no-op and 1-file rounds; first mount and rsync (untimed)")
up(warm_home)
mount(warm_home)
os.makedirs(warm_dest)
rsync(warm_dest)
settle()
# Files written less than 1 s before a mount are "racy" for the hash cache and hashed again by
# the next mount; one untimed re-mount more than a second later makes every entry trusted.
time.sleep(1.2)
_, js = mount(warm_home)
rsync(warm_dest)
tree_id = js["id"]  # the snapshot id of the tree as it is now
id_errors = []

# --- 3. the rounds --------------------------------------------------------------------------
results = {s: {"tae": [], "rsync": [], "json": []} for s in ("cold", "noop", "onefile")}


# The cold rounds' TAE_HOMEs and destinations are kept until the end (2 x 200 MB per round):
# unlinking 10,000 files took up to ~30 s on this box's ext4 (mounted with online discard) while
# other sessions were busy, and that should not run between timed steps.
synced_ms = []  # cold rsync followed by sync(1): taed's PutBlobs end with a syncfs, rsync's don't


def cold_tae(r):
    # A fresh TAE_HOME: a new taed with an empty data dir and no hash cache. taed is started
    # before and stopped after the timed mount (neither is timed).
    home = os.path.join(TMP, f"home-cold{r}")
    up(home)
    ms, js = mount(home)
    down(home)
    settle()
    return ms, js


def cold_rsync(r):
    dest = os.path.join(TMP, f"dest-cold{r}")
    os.makedirs(dest)
    ms = rsync(dest)
    t0 = time.perf_counter()
    settle()
    synced_ms.append(ms + (time.perf_counter() - t0) * 1000)
    return ms


def warm_tae(r):
    return mount(warm_home)


def warm_rsync(r):
    return rsync(warm_dest)


for r in range(ROUNDS):
    tae_first = r % 2 == 0
    log(f"round {r + 1}/{ROUNDS} ({'taectl' if tae_first else 'rsync'} first)")
    for scenario, tae_fn, rsync_fn in (("cold", cold_tae, cold_rsync),
                                       ("noop", warm_tae, warm_rsync),
                                       ("onefile", warm_tae, warm_rsync)):
        if scenario == "onefile":
            change_file()  # both then see the same one change
        for who in (("tae", "rsync") if tae_first else ("rsync", "tae")):
            if who == "tae":
                ms, js = tae_fn(r)
                results[scenario]["json"].append(js)
                # Same tree, same id (cold on a fresh taed included); a changed file, a new id.
                if (js["id"] == tree_id) != (scenario != "onefile"):
                    id_errors.append(f"round {r + 1} {scenario}: id {js['id'][:16]}")
                tree_id = js["id"]
            else:
                ms = rsync_fn(r)
            results[scenario][who].append(ms)
    if not filecmp.cmp(changed_path, os.path.join(warm_dest, CHANGED), shallow=False):
        log("rsync did not copy the changed file")
        sys.exit(1)

for r in range(ROUNDS):
    log(f"round {r + 1}: " + ", ".join(
        f"{s} taectl {results[s]['tae'][r]:.0f} ms ({results[s]['json'][r]['seconds'] * 1000:.0f} ms "
        f"in mount, hashed {results[s]['json'][r]['hashed_bytes']:,} B) / rsync {results[s]['rsync'][r]:.0f} ms"
        for s in results))

# --- 4. the table and the checks ------------------------------------------------------------
labels = {"cold": "cold", "noop": "no-op", "onefile": "1-file change"}
targets = {"cold": None, "noop": 0.5, "onefile": 1.0}
print()
print(f"taectl mount vs rsync -a: {nfiles:,} files, {nbytes:,} bytes, {ROUNDS} rounds, medians; "
      f"warm page cache for both (not dropped)")
print(f"machine: {os.cpu_count()} CPUs, 1-minute load average {load_start:.2f} at the start, "
      f"{os.getloadavg()[0]:.2f} at the end (anything above ~1 means other sessions competed)")
print("cold = taectl on a fresh TAE_HOME (new taed, empty blob store, no hash cache) vs rsync "
      "into an empty directory;")
print("taed syncs the file system after each PutBlobs call (4 MB), rsync never syncs: the second "
      "cold row adds a sync(1) to rsync")
print()
print("| scenario | taectl ms | rsync ms | taectl / rsync | target | |")
print("|---|---:|---:|---:|---|---|")
for s in results:
    t = statistics.median(results[s]["tae"])
    rs = statistics.median(results[s]["rsync"])
    ratio = t / rs
    target = targets[s]
    if target is None:
        verdict, met = "-", ""
    else:
        verdict = f"<= {target}x"
        met = "met" if ratio <= target else "not met"
    print(f"| {labels[s]} | {t:.1f} | {rs:.1f} | {ratio:.2f}x | {verdict} | {met} |")
    if s == "cold":
        rss = statistics.median(synced_ms)
        print(f"| cold, rsync followed by sync(1) | {t:.1f} | {rss:.1f} | {t / rss:.2f}x | - |  |")

print()
print("| taectl scenario | in MountTree ms | rest of the process ms | hashed bytes | blobs uploaded "
      "| bytes uploaded | expected upload | check |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
expected = {"cold": (nfiles, nbytes), "noop": (0, 0), "onefile": (1, CHANGED_SIZE)}
failed = False
for s in results:
    js = results[s]["json"]
    ok = all(j["files"] == nfiles and j["bytes"] == nbytes and
             (j["blobs_uploaded"], j["bytes_uploaded"]) == expected[s] for j in js)
    if s == "noop":
        ok = ok and all(j["existing"] for j in js)
    else:
        ok = ok and not any(j["existing"] for j in js)
    failed = failed or not ok

    def span(key):
        values = sorted({j[key] for j in js})
        return f"{values[0]:,}" if len(values) == 1 else f"{values[0]:,}-{values[-1]:,}"

    # "seconds" is MountTree's own clock; the rest is process start-up, taectl's set-up and exit.
    inside = statistics.median(j["seconds"] * 1000 for j in js)
    rest = statistics.median(ms - j["seconds"] * 1000 for ms, j in zip(results[s]["tae"], js))
    print(f"| {labels[s]} | {inside:.1f} | {rest:.1f} | {span('hashed_bytes')} | {span('blobs_uploaded')} | "
          f"{span('bytes_uploaded')} | {expected[s][1]:,} | {'ok' if ok else 'WRONG'} |")
print()
print("hashed bytes: a no-op re-hashes the file the previous round changed (the hash cache does not")
print("trust an entry written less than 1 s before the mount that recorded it); cold hashes all.")
if id_errors:
    print("FAIL: unexpected snapshot ids: " + "; ".join(id_errors))
    failed = True
if failed:
    print("FAIL: taectl's upload counts or snapshot ids are wrong (see above)")
    sys.exit(1)
print("byte and id checks passed")
PY
