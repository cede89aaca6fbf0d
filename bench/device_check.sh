#!/usr/bin/env bash
# Accelerator check: the torch engine (python3 -m tae_torch, no taed, no tae-train) vs plain
# PyTorch on the same model: tokens/s, host reads and CUDA syncs per 100 steps, fp32 vs bf16,
# 1 vs 2 processes (NCCL on 2 GPUs), FSDP. One table, under 8 minutes (bench/device_check.py).
#   bash bench/device_check.sh            # a CUDA machine: GPU sizes; no GPU: --quick
#   bash bench/device_check.sh --quick    # small sizes
# Needs python3 with torch and the run-key schema the torch engine reads (docs/engine.md, "One
# schema"): $TAE_SCHEMA, else build/share/tae/python/tae_torch/schema.json, which building
# tae-train writes. None of TAE's C++ build is needed where it runs: bring that one file along.
# PYTHON picks the interpreter.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
  if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    PYTHON=/usr/bin/python3
  else
    echo "device_check: $PYTHON cannot import torch (pip install torch, or set PYTHON)" >&2
    exit 2
  fi
fi
TAE_SCHEMA="${TAE_SCHEMA:-build/share/tae/python/tae_torch/schema.json}"
if [ ! -f "$TAE_SCHEMA" ]; then
  echo "device_check: no run-key schema at $TAE_SCHEMA: build tae-train (it writes it there), or" \
    "copy one from a machine that has (tae-train --schema > schema.json) and set TAE_SCHEMA" >&2
  exit 2
fi
export TAE_SCHEMA="$(realpath "$TAE_SCHEMA")"
export PYTHONPATH="agent/python${PYTHONPATH:+:$PYTHONPATH}"
# The whole check stays under 8 minutes even if every row ran to its own limit.
exec timeout 475 "$PYTHON" bench/device_check.py "$@"
