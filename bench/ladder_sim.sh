#!/usr/bin/env bash
# [scale] ladders simulated through the real fit (bench/scale/ladder_sim.cc):
#   bash bench/ladder_sim.sh                  # 2,000 ladders per shape, ~5 min on 2 cores
#   bash bench/ladder_sim.sh --only "5 rungs" # the shapes whose name starts so
# Extra arguments go to tae-ladder-sim (--ladders N, --seed S, --threads T, --draws B, --only P).
# Prints per shape: the coverage of the exponent's, E's and each constant multiplier's 95%
# interval, how often a constant multiplier is called a trend (the trend family's error, and per
# ablation "grows", "shrinks", "reverses"), and how often a fading one is called "shrinks", each
# with its standard error. Deterministic: the same flags print the same numbers. No BLAS is
# involved. Environment: TAE_BUILD_DIR (build).
set -euo pipefail

cd "$(dirname "$0")/.."

build="${TAE_BUILD_DIR:-build}"
if [ ! -f "$build/build.ninja" ]; then
  echo "ladder_sim: configuring $build..." >&2
  cmake -S . -B "$build" -G Ninja >/dev/null
fi
echo "ladder_sim: building tae-ladder-sim (1 job)..." >&2
cmake --build "$build" -j1 --target tae-ladder-sim >&2

exec "$build/bin/tae-ladder-sim" "$@"
