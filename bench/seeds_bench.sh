#!/usr/bin/env bash
# Adaptive seeds by simulation (see bench/README.md):
#   bash bench/seeds_bench.sh                   # min 3, max 12, alpha 0.05, 10,000 studies each
#   bash bench/seeds_bench.sh --max 24 --studies 4000
# Extra arguments go to tae-seeds-bench (--studies, --min, --max, --alpha, --seed). Prints the
# looks' nominal levels, then per true effect the share of comparisons called different and
# equivalent by the adaptive design, by max seeds tested once, and by testing p < alpha at every
# look, and the runs each uses; then a summary. Deterministic: the same flags print the same
# numbers. Takes about 15 s on the 2-core development box.
# Environment: TAE_BUILD_DIR (build).
set -euo pipefail

cd "$(dirname "$0")/.."

build="${TAE_BUILD_DIR:-build}"
if [ ! -f "$build/build.ninja" ]; then
  echo "seeds_bench: configuring $build..." >&2
  cmake -S . -B "$build" -G Ninja >/dev/null
fi
echo "seeds_bench: building tae-seeds-bench (1 job)..." >&2
cmake --build "$build" -j1 --target tae-seeds-bench >&2

exec "$build/bin/tae-seeds-bench" "$@"
