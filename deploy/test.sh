#!/usr/bin/env bash
# Install, build, and run the whole test suite (unit, engine and integration tests); then run the
# engine's tests again on the other CPU kernel path; then list the tests skipped for a missing
# prerequisite, with their reasons.
#
#   bash deploy/test.sh                 what CI runs
#   bash deploy/test.sh --under-load    the same with one core kept busy by a bounded background
#                                       load for the whole run (nightly-style; slower)
#
# The second engine pass: tae-train's matrix products run on oneDNN's sgemm with the CPU's widest
# instruction set (AVX-512 where there is one), or on libtorch's ops (OpenBLAS) where the fast
# kernels are off. The engine tests (ctest label kernel-paths) run once as the machine is and once
# on the other path: ONEDNN_MAX_CPU_ISA=AVX2 where that changes oneDNN's instruction set here,
# else TAE_FAST_KERNELS=0. So both kernel paths are checked on every machine.
set -euo pipefail
cd "$(dirname "$0")/.."

under_load=0
for arg in "$@"; do
  case "$arg" in
    --under-load) under_load=1 ;;
    -h | --help)
      sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
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

# The engine's tests whose results depend on the CPU's kernels (label kernel-paths: tae-train's
# C++ tests, and the torch reference against tae-train step by step) on the other path.
other_path() {
  local here capped
  here=$(build/bin/tae-train --runtime | python3 -c 'import json,sys; print(json.load(sys.stdin)["onednn_isa"])')
  capped=$(ONEDNN_MAX_CPU_ISA=AVX2 build/bin/tae-train --runtime |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["onednn_isa"])')
  if [[ "$here" != "$capped" ]]; then
    echo "ONEDNN_MAX_CPU_ISA=AVX2"
  else
    echo "TAE_FAST_KERNELS=0"
  fi
}
setting=$(other_path)
echo
echo "deploy/test.sh: the engine tests again with $setting" \
  "(as the machine is: $(build/bin/tae-train --runtime | python3 -c 'import json,sys; r=json.load(sys.stdin); print("oneDNN", r["onednn_isa"] + ",", "OpenBLAS", r.get("openblas_core", "?") + ",", "fast kernels", r["fast_kernels"])'))"
engine_status=0
env "$setting" ctest --test-dir build --output-on-failure -j 2 -L kernel-paths 2>&1 |
  tee build/ctest-output-other-kernels.txt || engine_status=$?
python3 deploy/skipped_tests.py build/ctest-output-other-kernels.txt build
if [[ "$engine_status" != 0 ]]; then
  echo "deploy/test.sh: the engine tests failed with $setting" >&2
  status=$engine_status
fi
exit "$status"
