#!/usr/bin/env bash
# Builds everything with AddressSanitizer + UndefinedBehaviorSanitizer and runs the unit and
# integration tests against the instrumented taed, tae-agent and taectl.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTAE_SANITIZERS=address,undefined
cmake --build build-asan -j "$(nproc)"
# Deliberate leaks only (each explained in the file).
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
build-asan/bin/tae_unit_tests
build-asan/bin/tae_integration_tests
