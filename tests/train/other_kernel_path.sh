#!/usr/bin/env bash
# Runs COMMAND on the CPU kernel path this machine does not take by default, so that both of
# tae-train's matrix-product paths are tested on every machine:
#
#   other_kernel_path.sh TAE_TRAIN COMMAND [ARG...]
#   other_kernel_path.sh TAE_TRAIN --print      just the setting, e.g. ONEDNN_MAX_CPU_ISA=AVX2
#
# tae-train's matrix products run on oneDNN's sgemm with the CPU's widest instruction set
# (AVX-512 where there is one), or on libtorch's ops (OpenBLAS) where the fast kernels are off.
# The other path is ONEDNN_MAX_CPU_ISA=AVX2 where that changes oneDNN's instruction set here
# (TAE_TRAIN --runtime says which it uses), else TAE_FAST_KERNELS=0. COMMAND's exit status is
# this script's.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: other_kernel_path.sh TAE_TRAIN COMMAND [ARG...] | TAE_TRAIN --print" >&2
  exit 2
fi
train=$1
shift

isa() {
  "$@" "$train" --runtime | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["onednn_isa"])'
}
here=$(isa env)
capped=$(isa env ONEDNN_MAX_CPU_ISA=AVX2)
if [[ "$here" != "$capped" ]]; then
  setting="ONEDNN_MAX_CPU_ISA=AVX2"
else
  setting="TAE_FAST_KERNELS=0"
fi
if [[ "$1" == "--print" ]]; then
  echo "$setting"
  exit 0
fi
echo "other_kernel_path.sh: $setting (as the machine is: oneDNN $here)"
exec env "$setting" "$@"
