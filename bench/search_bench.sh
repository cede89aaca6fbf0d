#!/usr/bin/env bash
# ASHA against the full grid, through a real taed (see bench/README.md, "ASHA"):
#   bash bench/search_bench.sh            # both grids: tae-train and a command job; ~3 min
#   bash bench/search_bench.sh --only job # one of them: train | job
# Each grid runs twice from the same file and seeds, once with [search] method = "asha" and once
# with --set search.method=grid, on one local agent with 2 slots. Prints, per grid, the steps
# each way (the sum of every run's last step), the share ASHA used, the points it pruned per rung,
# and each variant's chosen point (lowest mean final metric among the points that ran to the
# end) both ways, and whether they agree.
# Environment: TAE_BUILD_DIR (build).
set -euo pipefail

cd "$(dirname "$0")/.."
build="${TAE_BUILD_DIR:-build}"
echo "search_bench: building taed, taectl, tae-agent, tae-train (1 job)..." >&2
cmake --build "$build" -j1 --target taed taectl tae-agent tae-train >&2
exec /usr/bin/python3 bench/search/search_bench.py --bin "$build/bin" "$@"
