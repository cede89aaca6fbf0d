#!/usr/bin/env bash
# Install, build, and run the whole test suite (unit, engine and integration tests); then list
# the tests skipped for a missing prerequisite, with their reasons.
#
#   bash deploy/test.sh                 what CI runs
#   bash deploy/test.sh --under-load    the same with one core kept busy by a bounded background
#                                       load for the whole run (nightly-style; slower)
#
# Both CPU kernel paths: tae-train's matrix products run on oneDNN's sgemm with the CPU's widest
# instruction set (AVX-512 where there is one), or on libtorch's ops (OpenBLAS) where the fast
# kernels are off. The engine tests (ctest label kernel-paths) run as the machine is, and again on
# the other path (label kernel-paths-other, tests/train/other_kernel_path.sh: ONEDNN_MAX_CPU_ISA=AVX2
# where that changes oneDNN's instruction set here, else TAE_FAST_KERNELS=0).
set -euo pipefail
cd "$(dirname "$0")/.."

under_load=0
for arg in "$@"; do
  case "$arg" in
    --under-load) under_load=1 ;;
    -h | --help)
      sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "deploy/test.sh: unknown argument '$arg' (see --help)" >&2
      exit 2
      ;;
  esac
done

bash deploy/install-deps.sh
bash deploy/build.sh

load_pid=""
if [[ "$under_load" == 1 ]]; then
  # One busy process at normal priority for as long as the tests run, and at most 4 hours: a core
  # the tests do not get, as on a workstation where something else is compiling.
  timeout 14400 bash -c 'while :; do :; done' &
  load_pid=$!
  trap '[[ -n "$load_pid" ]] && kill "$load_pid" 2>/dev/null || true' EXIT
  echo "deploy/test.sh: a background load (pid $load_pid) keeps one core busy during the tests"
fi

status=0
ctest --test-dir build --output-on-failure -j 2 2>&1 | tee build/ctest-output.txt || status=$?
python3 deploy/skipped_tests.py build/ctest-output.txt build

exit "$status"
