#!/usr/bin/env bash
# Checkpoints off the worker: upload and restore of a 256 MB checkpoint against `cp -r` of the same
# directory on the same disk, in the same run (see bench/README.md).
#   bash bench/checkpoint_bench.sh            # ~1 minute on a quiet 2-core box
# Two layouts: one 256 MB file, and 64 files of 4 MB of which 4 then change. For each, a command
# job writes incompressible bytes into TAE_CHECKPOINT_DIR and marks it (tae_log.checkpoint); the
# agent uploads it to taed (hash, offer, send what taed lacks, commit; taed fsyncs every blob).
# The benchmark then times `cp -r` of the agent's checkpoint directory, the job deletes the
# directory and fails, `taectl retry` starts attempt 2, and the agent restores the checkpoint from
# taed before the job starts (fetch, verify, write; not synced, like cp). The times are the
# agent's own (its log lines). Exit status: 0 when it ran and the 4-of-64 upload sent exactly 4
# files; 1 when a check or command failed; 2 for bad arguments.
# Environment: BENCH_BUILD=0 (do not build first), TAE_BUILD_DIR (build), BENCH_TMP (parent of
# the temporary directory; default /var/tmp, a disk rather than a tmpfs).
set -euo pipefail

cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
  echo "usage: bash bench/checkpoint_bench.sh" >&2
  exit 2
fi
build="${TAE_BUILD_DIR:-build}"
if [ "${BENCH_BUILD:-1}" != 0 ]; then
  if [ ! -f "$build/build.ninja" ]; then
    cmake -S . -B "$build" -G Ninja >/dev/null
  fi
  cmake --build "$build" --target taed tae-agent tae-job taectl >/dev/null
fi
bin="$(cd "$build/bin" && pwd)"
work="$(mktemp -d "${BENCH_TMP:-/var/tmp}/tae-ckpt-bench.XXXXXX")"
export TAE_HOME="$work/home"
cleanup() {
  "$bin/taectl" down >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

"$bin/taectl" up --agents 1 >/dev/null

mkdir -p "$work/code"
cat >"$work/code/job.py" <<'EOF'
import os, shutil, sys, time
import tae_log

files, gates = int(sys.argv[1]), sys.argv[2]
d = os.environ["TAE_CHECKPOINT_DIR"]
if os.environ.get("TAE_RESUME_STEP"):
    sys.exit(0)  # attempt 2: the restore before it started is what was measured
os.makedirs(d, exist_ok=True)

def put(i):
    tmp = os.path.join(d, f"shard{i:02d}.tmp")
    with open(tmp, "wb") as f:
        f.write(os.urandom((256 << 20) // files))
    os.replace(tmp, os.path.join(d, f"shard{i:02d}.bin"))

def wait(name):
    while not os.path.exists(os.path.join(gates, name)):
        time.sleep(0.05)

for i in range(files):
    put(i)
tae_log.checkpoint(1)
wait("1")
if files > 1:
    for i in range(4):
        put(i)
    tae_log.checkpoint(2)
    wait("2")
wait("copied")
shutil.rmtree(d)  # the machine's disk is gone
sys.exit(3)
EOF

now() { date +%s.%N; }
# The seconds in the agent log line of run RUN that matches PATTERN ("... in 1.234 s").
agent_seconds() {
  local run="$1" pattern="$2" line=""
  for _ in $(seq 1 1200); do
    line="$("$bin/taectl" logs "r$run" 2>&1 | grep -E "$pattern" | tail -1 || true)"
    if [ -n "$line" ]; then
      break
    fi
    sleep 0.1
  done
  if [ -z "$line" ]; then
    echo "checkpoint_bench: no log line of r$run matches: $pattern" >&2
    "$bin/taectl" logs "r$run" >&2 || true
    exit 1
  fi
  echo "$line" >&2
  echo "$line" | sed -E 's/.* in ([0-9.]+) s.*/\1/'
}

ratio() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$@"; }

status=0
printf '%-40s %10s %12s %8s\n' "checkpoint of 256 MB" "tae (s)" "reference (s)" "speed" >"$work/table"
for files in 1 64; do
  gates="$work/gates-$files"
  mkdir -p "$gates"
  printf 'name = "ckpt-%s"\n[train]\nseeds = [0]\n[job]\ncode = "code"\ncommand = "/usr/bin/python3 job.py %s %s"\n' \
    "$files" "$files" "$gates" >"$work/spec-$files.toml"
  exp="$("$bin/taectl" submit "$work/spec-$files.toml" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["experiment"])')"
  run="$("$bin/taectl" runs "$exp" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')"
  up="$(agent_seconds "$run" 'checkpoint at step 1 uploaded')"
  touch "$gates/1"
  if [ "$files" -gt 1 ]; then
    up2="$(agent_seconds "$run" 'checkpoint at step 2 uploaded')"
    sent="$("$bin/taectl" logs "r$run" 2>&1 | grep 'checkpoint at step 2 uploaded' | sed -E 's/.*sent ([0-9]+) new.*/\1/')"
    if [ "$sent" != 4 ]; then
      echo "checkpoint_bench: the 4-of-64 upload sent $sent files, not 4" >&2
      status=1
    fi
    touch "$gates/2"
  fi
  src="$TAE_HOME/agents/local-0/runs/r$run/checkpoint"
  t0="$(now)"
  cp -r "$src" "$work/copy-$files"
  t1="$(now)"
  cp_s="$(python3 -c "print($t1 - $t0)")"
  rm -rf "$work/copy-$files"
  # taed fsyncs what it stores: the fair reference for an upload is a copy made durable too.
  t0="$(now)"
  cp -r "$src" "$work/copy-$files"
  sync -f "$work/copy-$files"
  t1="$(now)"
  cps_s="$(python3 -c "print($t1 - $t0)")"
  rm -rf "$work/copy-$files"
  touch "$gates/copied"
  "$bin/taectl" wait "$exp" --timeout 300 >/dev/null 2>&1 || true  # it fails on purpose
  "$bin/taectl" retry "$exp" --failed >/dev/null
  down="$(agent_seconds "$run" 'restored into TAE_CHECKPOINT_DIR')"
  "$bin/taectl" wait "$exp" --timeout 300 >/dev/null
  printf '%-40s %10.3f %12.3f %7sx  (cp -r)\n' "upload, $files file(s)" "$up" "$cp_s" "$(ratio "$cp_s" "$up")" >>"$work/table"
  printf '%-40s %10.3f %12.3f %7sx  (cp -r; sync)\n' "upload, $files file(s)" "$up" "$cps_s" "$(ratio "$cps_s" "$up")" >>"$work/table"
  if [ "$files" -gt 1 ]; then
    printf '%-40s %10.3f %12s %8s\n' "upload of 4 changed of 64 (sent $sent)" "$up2" "-" "-" >>"$work/table"
  fi
  printf '%-40s %10.3f %12.3f %7sx  (cp -r)\n' "restore, $files file(s), fresh dir" "$down" "$cp_s" "$(ratio "$cp_s" "$down")" >>"$work/table"
done
echo
cat "$work/table"
echo "speed = cp -r time / tae time (1.0: as fast as cp -r; target for restore: >= 0.5)"
exit "$status"
