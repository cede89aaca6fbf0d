#pragma once

// CPU thread budget of a run. On a shared 2-core box an oversubscribed run (OpenMP + OpenBLAS
// pools each sized to all cores) is several times slower, so every pool is sized explicitly.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tae::train {

// train.threads when > 0, else TAE_THREADS (`env_value`, nullptr when unset), else the number of
// hardware threads. InvalidArgument when TAE_THREADS is set but not a positive integer.
absl::StatusOr<int> ResolveThreadCount(int64_t configured, const char* env_value);

// The OpenMP variables to set before libgomp loads, for a run of `threads` threads allowed on
// `allowed_cpus` CPUs, given the environment (`getenv`); variables already set are kept.
//  - OMP_WAIT_POLICY=PASSIVE when threads > 1: libgomp's default spinning at every barrier made
//    steps 5-40x slower on shared cores here.
//  - OMP_PROC_BIND=true when threads > 1 and threads >= allowed_cpus, i.e. the run has every CPU
//    it may use to itself: each OpenMP thread stays on its CPU (+9% tokens/s at the benchmark's
//    shapes, bench/README.md). Not when the run gets a share of the CPUs: every process would bind
//    its threads to the same first CPUs.
std::vector<std::pair<std::string, std::string>> OpenMpSettingsToAdd(
    int threads, int allowed_cpus, const std::function<const char*(const char*)>& getenv);

// The number of CPUs in this process's affinity mask.
int AllowedCpus();

// libgomp reads its variables only when it is loaded, so when OpenMpSettingsToAdd() returns any,
// this sets them and re-executes /proc/self/exe with the same `argv` (same pid and fds). Returns
// only when no re-exec was needed or it failed (then it warns on stderr).
void ReexecWithOpenMpSettingsIfNeeded(int threads, char** argv);

// Sizes libtorch's intra-op pool (OpenMP) to `threads`, its inter-op pool to 1 (only possible
// before the first inter-op use; later calls keep the first size) and OpenBLAS's own pool.
void ConfigureThreads(int threads);

// The BLAS shared library this process has loaded (its path as mapped, e.g.
// /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3), or "" when none is.
std::string LoadedBlasLibrary();

}  // namespace tae::train
