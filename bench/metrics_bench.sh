#!/usr/bin/env bash
# Metrics benchmarks (see bench/README.md):
#   bash bench/metrics_bench.sh ingest   # simulated agents -> real taed; points/s vs raw SQLite
#   bash bench/metrics_bench.sh query    # taectl report / ls on 1,000 runs x 10,000 points
#   bash bench/metrics_bench.sh all
# Extra arguments (with ingest or query only) go to the benchmark; see
# `build/bin/tae-metrics-bench ingest --help`. Exit status: 0 when the benchmark ran and its
# checks passed, whether or not the targets were met (the tables say).
# Environment: BENCH_PRIORITY=1 (root: raise the benchmark's scheduler autogroups on a shared
# box), TAE_BUILD_DIR (build).
set -euo pipefail

cd "$(dirname "$0")/.."

what="${1:-all}"
shift || true
case "$what" in
  ingest | query) ;;
  all)
    if [ $# -gt 0 ]; then
      echo "metrics_bench: flags go with ingest or query, not all" >&2
      exit 2
    fi
    ;;
  *)
    echo "usage: bash bench/metrics_bench.sh ingest|query|all [benchmark flags]" >&2
    exit 2
    ;;
esac

build="${TAE_BUILD_DIR:-build}"
if [ ! -f "$build/build.ninja" ]; then
  echo "metrics_bench: configuring $build..." >&2
  cmake -S . -B "$build" -G Ninja >/dev/null
fi
# The benchmark drives the real taed and taectl; build what is stale (1 job: a shared 2-core box).
echo "metrics_bench: building tae-metrics-bench, taed, taectl (1 job)..." >&2
cmake --build "$build" -j1 --target tae-metrics-bench taed taectl >&2

bench="$build/bin/tae-metrics-bench"
status=0
if [ "$what" = ingest ] || [ "$what" = all ]; then
  "$bench" ingest "$@" || status=$?
fi
if [ "$what" = query ] || [ "$what" = all ]; then
  "$bench" query "$@" || status=$?
fi
exit "$status"
