#pragma once

// CPU thread budget of a run. On a shared 2-core box an oversubscribed run (OpenMP + OpenBLAS
// pools each sized to all cores) is several times slower, so every pool is sized explicitly.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tae::train {

// train.threads when > 0, else TAE_THREADS (`env_value`, nullptr when unset), else the number of
// hardware threads. InvalidArgument when TAE_THREADS is set but not a positive integer.
absl::StatusOr<int> ResolveThreadCount(int64_t configured, const char* env_value);

// libgomp's default wait policy spins at every barrier; with more than one thread on shared cores
// that made training steps 5-40x slower here. libgomp reads OMP_WAIT_POLICY only when it is
// loaded, so when `threads` > 1 and the variable is unset this sets OMP_WAIT_POLICY=PASSIVE and
// re-executes /proc/self/exe with the same `argv` (same pid and fds). Returns only when no
// re-exec was needed or it failed (then it warns on stderr).
void ReexecWithPassiveOpenMpIfNeeded(int threads, char** argv);

// Sizes libtorch's intra-op pool (OpenMP) to `threads`, its inter-op pool to 1 (only possible
// before the first inter-op use; later calls keep the first size) and OpenBLAS's own pool.
void ConfigureThreads(int threads);

// The BLAS shared library this process has loaded (its path as mapped, e.g.
// /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3), or "" when none is.
std::string LoadedBlasLibrary();

}  // namespace tae::train
