#!/usr/bin/env bash
# Accelerator check: the torch engine (python3 -m tae_torch, no taed, no tae-train) vs plain
# PyTorch on the same model: tokens/s, host reads and CUDA syncs per 100 steps, fp32 vs bf16,
# 1 vs 2 processes (NCCL on 2 GPUs), FSDP. One table, under 8 minutes (bench/device_check.py).
#   bash bench/device_check.sh            # a CUDA machine: GPU sizes; no GPU: --quick
#   bash bench/device_check.sh --quick    # small sizes
# Needs python3 with torch only (none of TAE's C++ build). PYTHON picks the interpreter.
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
export PYTHONPATH="agent/python${PYTHONPATH:+:$PYTHONPATH}"
# The whole check stays under 8 minutes even if every row ran to its own limit.
exec timeout 475 "$PYTHON" bench/device_check.py "$@"
