#!/usr/bin/env bash
# Adaptive seeds by simulation (see bench/README.md):
#   bash bench/seeds_bench.sh                   # min 3, max 28, alpha 0.05, 10,000 studies each
#   bash bench/seeds_bench.sh --max 12 --studies 4000
#   bash bench/seeds_bench.sh --obf --futility 0   # the design before Hwang-Shih-DeCani spending
# Extra arguments go to tae-seeds-bench (--studies, --min, --max, --alpha, --seed, --gamma G for
# Hwang-Shih-DeCani spending or --obf for O'Brien-Fleming-type, --futility F). Prints the looks'
# nominal levels; per true effect the share of comparisons called different and equivalent by the
# adaptive design, by max seeds tested once, and by testing p < alpha at every look, and the runs
# each uses; the design next to the alternatives it was chosen from at max 12 and at its max; the
# design at 1 sigma for max 20..32; then a summary for the design and for min 3, max 12, with the
# acceptance criterion's verdict; then the real planner (seeds::PlanSeeds) as it runs: three
# variants vs one shared baseline, runs ending in random order, failing runs (--fail P, 0.02),
# --planner-studies N (20,000) per scenario, with each comparison's false-positive rate +- SE
# (--planner-only runs just that). Deterministic: the same flags print the same numbers. Takes
# about 2.5 min alone on the 2-core development box.
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
