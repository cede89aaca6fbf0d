#!/usr/bin/env bash
# ASHA against the full grid, through a real taed (see bench/README.md, "ASHA"):
#   bash bench/search_bench.sh            # three grids: tae-train lm at 405 and 810 steps, and a
#                                         # command job; ~6 min on 2 cores
#   bash bench/search_bench.sh --only job # one kind: train | job (--steps 405|810: one tae-train)
# Each grid runs twice from the same file and seeds, once with [search] method = "asha" and once
# with --set search.method=grid, on one local agent with 2 slots. Prints, per grid, the steps
# each way (the sum of every run's last step), the share ASHA used, the runs it pruned,
# and each variant's chosen point (lowest mean final metric among the points that ran to the
# end) both ways, and whether they agree.
# Environment: TAE_BUILD_DIR (build).
set -euo pipefail

cd "$(dirname "$0")/.."
build="${TAE_BUILD_DIR:-build}"
echo "search_bench: building taed, taectl, tae-agent, tae-train (1 job)..." >&2
cmake --build "$build" -j1 --target taed taectl tae-agent tae-train >&2
exec /usr/bin/python3 bench/search/search_bench.py --bin "$build/bin" "$@"
