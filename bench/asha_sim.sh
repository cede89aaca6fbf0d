#!/usr/bin/env bash
# ASHA on a finite grid, simulated through the real search code (bench/search/asha_sim.cc):
#   bash bench/asha_sim.sh                    # 20,000 studies per shape, ~1 min on 2 cores
#   bash bench/asha_sim.sh --only crossing/   # the shapes whose name starts so
# Extra arguments go to tae-asha-sim (--studies N, --seed S, --threads T, --only PREFIX).
# Prints per shape (curves x start order x search.bootstrap): the share of the full grid's steps,
# how often the full grid's 1st, 2nd and 3rd point is stopped, how often the chosen point is not
# the full grid's best, and the chosen point's regret, each with its standard error.
# Deterministic: the same flags print the same numbers. Environment: TAE_BUILD_DIR (build).
set -euo pipefail

cd "$(dirname "$0")/.."

build="${TAE_BUILD_DIR:-build}"
if [ ! -f "$build/build.ninja" ]; then
  echo "asha_sim: configuring $build..." >&2
  cmake -S . -B "$build" -G Ninja >/dev/null
fi
echo "asha_sim: building tae-asha-sim (1 job)..." >&2
cmake --build "$build" -j1 --target tae-asha-sim >&2

exec "$build/bin/tae-asha-sim" "$@"
