#!/usr/bin/env bash
# Install, build, and run the whole test suite (unit, engine and integration tests); then list
# the tests skipped for a missing prerequisite, with their reasons.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
bash deploy/build.sh
status=0
ctest --test-dir build --output-on-failure -j 2 2>&1 | tee build/ctest-output.txt || status=$?
python3 deploy/skipped_tests.py build/ctest-output.txt build
exit "$status"
