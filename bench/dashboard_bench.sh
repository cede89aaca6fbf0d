#!/usr/bin/env bash
# The dashboard against 1,000 runs x 10,000 points (see bench/README.md, "Dashboard"):
#   bash bench/dashboard_bench.sh              # ~4 minutes on the 2-core box (the data set: +20 s)
# Makes the query benchmark's data set with a 50-variant x 10-seed experiment (kept in
# BENCH_DATA, default /var/tmp/tae-dash-data, and reused), then runs bench/dashboard/
# dashboard_bench.py on a copy of it: taed's curve answers, first render in headless Chromium,
# new-point-to-screen latency, taed's memory with 20 open dashboards; each against a reference
# measured in the same run. Needs chromium, chromium-driver and python3-selenium
# (deploy/install-deps.sh installs them).
# Environment: BENCH_ROUNDS (default 5), BENCH_DATA, TAE_BUILD_DIR (build).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${TAE_BUILD_DIR:-build}"
data="${BENCH_DATA:-/var/tmp/tae-dash-data}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja >/dev/null
fi
echo "dashboard_bench: building tae-metrics-bench, taed, taectl (1 job)..." >&2
cmake --build "$build" -j1 --target tae-metrics-bench taed taectl >&2
"$build/bin/tae-metrics-bench" dataset --data "$data" --big-variants 50 --big-runs 500 >&2
exec /usr/bin/python3 bench/dashboard/dashboard_bench.py "$build/bin" "$data" \
  --rounds "${BENCH_ROUNDS:-5}"
