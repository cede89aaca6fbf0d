#pragma once

// What this tae-train process runs on, as the run's metadata (the "meta" object of a metric line,
// docs/cli.md): the run's runtime facts as key/value strings that
// taed stores with the run and `taectl show` prints.

#include <string>
#include <utility>
#include <vector>

namespace tae::train {

// In this order: libtorch ("1.13.0"), blas (the loaded library's path, or "none"), threads
// (libtorch's intra-op pool), interop_threads, openblas_threads (only when OpenBLAS is loaded),
// omp_wait_policy and omp_proc_bind (OMP_WAIT_POLICY / OMP_PROC_BIND, or "unset"). Call after
// ConfigureThreads().
std::vector<std::pair<std::string, std::string>> RuntimeMetadata();

}  // namespace tae::train
