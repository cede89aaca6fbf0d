#include "agent/train/runtime_info.h"

// ATen/Parallel.h rather than torch/torch.h: torch::get_num_threads() is at::get_num_threads(),
// and this file then compiles in a fraction of the time and memory.
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/version.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "agent/train/kernel_facts.h"
#include "agent/train/threads.h"

namespace tae::train {

std::vector<std::pair<std::string, std::string>> RuntimeMetadata() {
  std::vector<std::pair<std::string, std::string>> meta;
  meta.emplace_back("libtorch", absl::StrCat(TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR, ".",
                                             TORCH_VERSION_PATCH));
  const std::string blas = LoadedBlasLibrary();
  meta.emplace_back("blas", blas.empty() ? "none" : blas);
  meta.emplace_back("threads", absl::StrCat(at::get_num_threads()));
  meta.emplace_back("interop_threads", absl::StrCat(at::get_num_interop_threads()));
  using GetThreads = int (*)();
  if (void* symbol = ::dlsym(RTLD_DEFAULT, "openblas_get_num_threads")) {
    meta.emplace_back("openblas_threads", absl::StrCat(reinterpret_cast<GetThreads>(symbol)()));
  }
  using GetCore = char* (*)();
  if (void* symbol = ::dlsym(RTLD_DEFAULT, "openblas_get_corename")) {
    meta.emplace_back("openblas_core", reinterpret_cast<GetCore>(symbol)());
  }
  meta.emplace_back("onednn_isa", OneDnnIsa());
  meta.emplace_back("fast_kernels", FastKernelsEnabled()     ? "on"
                                    : FastKernelsTurnedOff() ? "off (TAE_FAST_KERNELS)"
                                                             : "off (no dnnl_sgemm)");
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  meta.emplace_back("omp_wait_policy", wait_policy != nullptr ? wait_policy : "unset");
  const char* proc_bind = std::getenv("OMP_PROC_BIND");
  meta.emplace_back("omp_proc_bind", proc_bind != nullptr ? proc_bind : "unset");
  return meta;
}

}  // namespace tae::train
