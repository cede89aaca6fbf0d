#!/usr/bin/env bash
# The main job: install, build, start taed with one local agent, run the quickstart ablation
# study and print its report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
bash deploy/build.sh taed tae-agent tae-train taectl
build/bin/taectl up --agents 1 --slots 2
build/bin/taectl submit examples/quickstart.toml --wait
build/bin/taectl report quickstart
