#!/usr/bin/env bash
# The tae Python library at a lab's scale (bench/python/python_bench.py, bench/README.md):
#   bash bench/python_bench.sh          # warm page cache; ~5 min on 2 cores once the data exists
#   bash bench/python_bench.sh --cold   # also the first history() after dropping the page cache
#                                       # (root)
# The data set (the scale bench's 10,000-run study, ~67M points) is made once in
# BENCH_PYTHON_DATA (default /var/tmp/tae-py-data) and reused. Environment: TAE_BUILD_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${TAE_BUILD_DIR:-build}"
echo "python_bench: building taed, taectl, tae-metrics-bench (1 job)..." >&2
cmake --build "$build" -j1 --target taed taectl tae-metrics-bench >&2
data="${BENCH_PYTHON_DATA:-/var/tmp/tae-py-data}"
mkdir -p "$data"
"$build/bin/tae-metrics-bench" dataset --data "$data" --big-runs 10000 --big-variants 100 \
  --steps 1000 --small-experiments 0 >&2
exec /usr/bin/python3 bench/python/python_bench.py "$build/bin" client/python "$build/python" \
  "$data" "$@"
