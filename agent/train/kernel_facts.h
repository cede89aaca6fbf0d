#pragma once

// Whether and how the CPU fast paths (kernels.h) run in this process, without libtorch's headers
// (runtime_info.cc reports these as the run's metadata).

#include <string>

namespace tae::train {

// Whether the fast paths can run in this process: dnnl_sgemm is there, TAE_FAST_KERNELS is not
// "0" or "off" (which sends every caller to libtorch's ops, e.g. to check results on the other
// kernel path), and no test turned them off.
bool FastKernelsEnabled();
// Whether TAE_FAST_KERNELS turned them off for this process.
bool FastKernelsTurnedOff();
// The instruction set of oneDNN's kernels (dnnl_sgemm among them) in this process: "avx2",
// "avx512_core", ..., after ONEDNN_MAX_CPU_ISA; "none" without oneDNN.
std::string OneDnnIsa();

}  // namespace tae::train
