#!/usr/bin/env bash
# What an ablation table promises, measured through the real report code (bench/stats/main.cc):
#   bash bench/stats_bench.sh                      # 20,000 studies per shape
#   bash bench/stats_bench.sh --only null/fixed3   # the shapes whose name starts so
# Extra arguments go to tae-stats-bench (--studies N, --seed S, --threads T, --only PREFIX).
# Prints per shape: family-wise and per-comparison error, the coverage of delta_ci95, power
# beside correction none, the frontier's wrong-answer rate, the tuned view's verdicts and bias,
# each with its standard error; exits 1 when a figure is outside its promise (an error rate above
# alpha + 2 SE, a coverage below 95% - 2 SE). Deterministic: the same flags print the same numbers.
# Environment: TAE_BUILD_DIR (build).
set -euo pipefail

cd "$(dirname "$0")/.."

build="${TAE_BUILD_DIR:-build}"
if [ ! -f "$build/build.ninja" ]; then
  echo "stats_bench: configuring $build..." >&2
  cmake -S . -B "$build" -G Ninja >/dev/null
fi
echo "stats_bench: building tae-stats-bench (1 job)..." >&2
cmake --build "$build" -j1 --target tae-stats-bench >&2

exec "$build/bin/tae-stats-bench" "$@"
