#!/usr/bin/env bash
# Profiler overhead and int8 vs fp32 evaluation speed of tae-train (see bench/README.md).
#   bash bench/profile_bench.sh
# Environment: BENCH_THREADS (2), BENCH_ROUNDS (3), TAE_TRAIN (build/bin/tae-train).
set -euo pipefail

cd "$(dirname "$0")/.."

export TAE_TRAIN="${TAE_TRAIN:-build/bin/tae-train}"
if [ ! -x "$TAE_TRAIN" ]; then
  echo "profile_bench: $TAE_TRAIN is missing; building it (2 jobs)..." >&2
  if [ ! -f build/build.ninja ]; then
    cmake -S . -B build -G Ninja >&2
  fi
  ninja -C build -j 2 tae-train >&2
fi

exec /usr/bin/python3 bench/profile_bench.py
