#!/usr/bin/env bash
# Install, build, and run the whole test suite (unit, engine and integration tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
bash deploy/build.sh
ctest --test-dir build --output-on-failure -j 2
