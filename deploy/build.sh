#!/usr/bin/env bash
# Configures and builds TAE into ./build (programs land in build/bin). Arguments, if any, are the
# targets to build (default: everything, tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$(nproc)" ${1:+--target "$@"}
# The tae Python library on Debian's python3 path (docs/python.md).
bash deploy/install-python.sh build
