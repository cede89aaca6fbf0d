#!/usr/bin/env bash
# Builds the libFuzzer targets in build-fuzz/ (clang, TAE_FUZZ=ON) and fuzzes each for SECONDS
# (default 60), one after another, on a copy of fuzz/corpus/<target>/ so the repository's seeds are
# not changed. Prints each target's executions and whether it crashed; exits 1 if any did.
# Crash inputs are kept in build-fuzz/artifacts/<target>/ and the logs in build-fuzz/fuzz-logs/.
#
#   fuzz/run.sh [SECONDS]
#   BUILD_DIR=/tmp/bf KEEP_CORPUS=1 fuzz/run.sh 300   # KEEP_CORPUS: keep the grown corpora
set -euo pipefail

seconds="${1:-60}"
if ! [[ "${seconds}" =~ ^[0-9]+$ ]] || [[ "${seconds}" -eq 0 ]]; then
  echo "usage: fuzz/run.sh [seconds per target, default 60]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-${root}/build-fuzz}"
targets=(fuzz_spec fuzz_metric_line fuzz_manifest fuzz_http fuzz_agent_link fuzz_tfevents
         fuzz_gke_listing)

cmake -S "${root}" -B "${build}" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DTAE_FUZZ=ON \
  -DTAE_BUILD_TESTS=OFF -DTAE_BUILD_BENCH=OFF >/dev/null
cmake --build "${build}" --target "${targets[@]}"

work="$(mktemp -d "${TMPDIR:-/tmp}/tae-fuzz.XXXXXX")"
if [[ -z "${KEEP_CORPUS:-}" ]]; then
  trap 'rm -rf "${work}"' EXIT
fi

declare -A dicts=([fuzz_spec]=spec.dict [fuzz_metric_line]=metric_line.dict [fuzz_http]=http.dict)
summary=()
failed=0
for target in "${targets[@]}"; do
  corpus="${work}/${target}"
  artifacts="${build}/artifacts/${target}"
  mkdir -p "${artifacts}"
  cp -r "${root}/fuzz/corpus/${target}" "${corpus}"
  args=(-max_total_time="${seconds}" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048
        -artifact_prefix="${artifacts}/")
  if [[ -n "${dicts[${target}]:-}" ]]; then
    args+=(-dict="${root}/fuzz/${dicts[${target}]}")
  fi
  log="${build}/fuzz-logs/${target}.log"
  mkdir -p "${build}/fuzz-logs"
  echo "== ${target}: ${seconds} s"
  status=0
  # One in-process fuzzing job: -jobs would fork workers and move their output to fuzz-N.log.
  "${build}/bin/${target}" "${args[@]}" "${corpus}" >"${log}" 2>&1 || status=$?
  tail -n 25 "${log}"
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "${log}" | tail -n 1)"
  if [[ "${status}" -eq 0 ]]; then
    result="ok"
  else
    result="CRASHED (exit ${status}; inputs in ${artifacts}/, log ${log})"
    failed=1
  fi
  summary+=("$(printf '%-18s executions: %-10s corpus: %4d files  %s' "${target}" \
    "${execs:-?}" "$(find "${corpus}" -type f | wc -l)" "${result}")")
done

echo "== summary (${seconds} s per target)"
printf '%s\n' "${summary[@]}"
if [[ -n "${KEEP_CORPUS:-}" ]]; then
  echo "grown corpora kept in ${work}"
fi
exit "${failed}"
