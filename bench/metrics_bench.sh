#!/usr/bin/env bash
# Metrics benchmarks (see bench/README.md):
#   bash bench/metrics_bench.sh ingest   # simulated agents -> real taed; points/s vs raw SQLite
#   bash bench/metrics_bench.sh query    # taectl report / ls on 1,000 runs x 10,000 points
#   bash bench/metrics_bench.sh all
#   bash bench/metrics_bench.sh scale    # a lab: 30,000 runs, 2,001 studies, ~200M points
#                                        # (~11 min; the data set, ~8.5 GB, is kept in
#                                        # BENCH_SCALE_DATA, default /var/tmp/tae-scale-data)
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
  ingest | query | scale) ;;
  all)
    if [ $# -gt 0 ]; then
      echo "metrics_bench: flags go with ingest or query, not all" >&2
      exit 2
    fi
    ;;
  *)
    echo "usage: bash bench/metrics_bench.sh ingest|query|scale|all [benchmark flags]" >&2
    exit 2
    ;;
esac

build="${TAE_BUILD_DIR:-build}"
if [ ! -f "$build/build.ninja" ]; then
  echo "metrics_bench: configuring $build..." >&2
  cmake -S . -B "$build" -G Ninja >/dev/null
fi
# The benchmark drives the real taed and taectl; build what is stale (1 job: a shared 2-core box).
echo "metrics_bench: building tae-metrics-bench, tae-scheduler-bench, taed, taectl (1 job)..." >&2
cmake --build "$build" -j1 --target tae-metrics-bench tae-scheduler-bench taed taectl >&2

bench="$build/bin/tae-metrics-bench"
status=0
if [ "$what" = ingest ] || [ "$what" = all ]; then
  "$bench" ingest "$@" || status=$?
fi
if [ "$what" = query ] || [ "$what" = all ]; then
  "$bench" query "$@" || status=$?
fi
if [ "$what" = scale ]; then
  # The issue's lab (bench/README.md, "Scale"): one 10,000-run study of 100 variants and 2,000
  # studies of 10 runs, 1,000 steps each; submitted through taed, points written into SQLite.
  data="${BENCH_SCALE_DATA:-/var/tmp/tae-scale-data}"
  mkdir -p "$data"
  start=$(date +%s)
  "$bench" dataset --data "$data" --big-runs 10000 --big-variants 100 --steps 1000 \
    --small-experiments 2000 >&2 || exit 1
  echo "metrics_bench: the data set is ready ($(($(date +%s) - start)) s, made or reused)" >&2
  # Submits and scheduling passes at 0, 1,000 and 2,000 queued studies (their own store).
  "$build/bin/tae-scheduler-bench" "$@" || status=$?
  # ls, report, runs, curves and taed's memory on the data set.
  /usr/bin/python3 bench/metrics/scale_bench.py "$build/bin" "$data" || status=$?
  # Ingest into a copy of that store against raw SQLite into the same copy, 3 rounds (a fresh
  # copy each), judged on the median round.
  "$bench" ingest --agents 4 --rounds 3 --store "$data" || status=$?
fi
exit "$status"
