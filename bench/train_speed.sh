#!/usr/bin/env bash
# Training-speed benchmark: tae-train vs an equivalent PyTorch eager script (see bench/README.md).
#   bash bench/train_speed.sh
# Environment: BENCH_THREADS (2), BENCH_ROUNDS (3), BENCH_STEPS (60, the first 10 untimed),
# TAE_TRAIN (build/bin/tae-train).
set -euo pipefail

cd "$(dirname "$0")/.."

# Debian's python3-torch is installed for /usr/bin/python3 (not a pyenv/venv python).
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "train_speed: python3-torch is missing; installing Debian's python3-torch (apt-get)..." >&2
  if [ "$(id -u)" -eq 0 ]; then
    apt-get install -y python3-torch >&2
  else
    sudo apt-get install -y python3-torch >&2
  fi
fi

export TAE_TRAIN="${TAE_TRAIN:-build/bin/tae-train}"
if [ ! -x "$TAE_TRAIN" ]; then
  echo "train_speed: $TAE_TRAIN is missing; building it (2 jobs)..." >&2
  if [ ! -f build/build.ninja ]; then
    cmake -S . -B build -G Ninja >&2
  fi
  ninja -C build -j 2 tae-train >&2
fi
# The torch engine beside tae-train (and train_pytorch.py, which imports its model) reads the
# run-key schema that building tae-train writes there; a tae-train built before it did writes it
# now.
schema="$(dirname "$TAE_TRAIN")/../share/tae/python/tae_torch/schema.json"
if [ ! -f "$schema" ]; then
  "$TAE_TRAIN" --schema > "$schema.tmp" && mv "$schema.tmp" "$schema"
fi

exec /usr/bin/python3 bench/train_speed.py
