#!/usr/bin/env bash
# Builds the programs that do not link libtorch with clang's -Wthread-safety (ABSL_GUARDED_BY
# annotations are checked) and runs the unit tests from that build.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang++ >/dev/null || { echo "thread-safety: install clang first"; exit 1; }
CC=clang CXX=clang++ cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Debug
cmake --build build-clang -j "$(nproc)" --target taed tae-agent taectl tae_unit_tests
build-clang/bin/tae_unit_tests
