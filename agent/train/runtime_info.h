#pragma once

// What this tae-train process runs on, as the run's metadata (the "meta" object of a metric line,
// docs/cli.md): the run's runtime facts as key/value strings that
// taed stores with the run and `taectl show` prints.

#include <string>
#include <utility>
#include <vector>

namespace tae::train {

// In this order: libtorch ("1.13.0"), blas (the loaded library's path, or "none"), threads
// (libtorch's intra-op pool), interop_threads, openblas_threads and openblas_core (the kernel
// set OpenBLAS picked, after OPENBLAS_CORETYPE; only when OpenBLAS is loaded), onednn_isa (the
// instruction set of oneDNN's sgemm, after ONEDNN_MAX_CPU_ISA), fast_kernels ("on", or "off"
// and why: kernels.h), omp_wait_policy and omp_proc_bind (OMP_WAIT_POLICY / OMP_PROC_BIND, or
// "unset"). Call after ConfigureThreads().
std::vector<std::pair<std::string, std::string>> RuntimeMetadata();

}  // namespace tae::train
