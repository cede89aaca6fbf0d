#include "agent/train/threads.h"

#include <dlfcn.h>
#include <sched.h>
#include <torch/torch.h>
#include <torch/version.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tae::train {

absl::StatusOr<int> ResolveThreadCount(int64_t configured, const char* env_value) {
  if (configured > 0) {
    return static_cast<int>(configured);
  }
  if (env_value != nullptr) {
    int threads = 0;
    if (!absl::SimpleAtoi(env_value, &threads) || threads <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("TAE_THREADS=\"", env_value, "\" is not a positive integer"));
    }
    return threads;
  }
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware > 0 ? static_cast<int>(hardware) : 1;
}

std::vector<std::pair<std::string, std::string>> OpenMpSettingsToAdd(
    int threads, int allowed_cpus, const std::function<const char*(const char*)>& getenv) {
  std::vector<std::pair<std::string, std::string>> add;
  if (threads <= 1) {
    return add;
  }
  if (getenv("OMP_WAIT_POLICY") == nullptr) {
    add.emplace_back("OMP_WAIT_POLICY", "PASSIVE");
  }
  if (threads >= allowed_cpus && getenv("OMP_PROC_BIND") == nullptr) {
    add.emplace_back("OMP_PROC_BIND", "true");
  }
  return add;
}

int AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) {
    const unsigned hardware = std::thread::hardware_concurrency();
    return hardware > 0 ? static_cast<int>(hardware) : 1;
  }
  return CPU_COUNT(&set);
}

void ReexecWithOpenMpSettingsIfNeeded(int threads, char** argv) {
  const auto add = OpenMpSettingsToAdd(threads, AllowedCpus(), [](const char* name) {
    return static_cast<const char*>(std::getenv(name));
  });
  if (add.empty()) {
    return;
  }
  for (const auto& [name, value] : add) {
    if (::setenv(name.c_str(), value.c_str(), /*overwrite=*/1) != 0) {
      return;
    }
  }
  ::execv("/proc/self/exe", argv);
  std::cerr << "tae-train: warning: cannot re-execute with the OpenMP settings "
            << add.front().first << "=" << add.front().second << ": " << std::strerror(errno)
            << "; multi-threaded steps may be slow\n";
}

void ConfigureThreads(int threads) {
  torch::set_num_threads(threads);
  try {
    torch::set_num_interop_threads(1);
  } catch (const c10::Error&) {
    // Already sized (a second call in one process, e.g. in tests); the first size stays.
  }
  // libtorch does not resize OpenBLAS's pthread pool; call it directly when it is loaded.
  using SetThreads = void (*)(int);
  if (void* symbol = ::dlsym(RTLD_DEFAULT, "openblas_set_num_threads")) {
    reinterpret_cast<SetThreads>(symbol)(threads);
  }
}

}  // namespace tae::train

namespace tae::train {

std::string LoadedBlasLibrary() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) {
      continue;
    }
    const std::string path = line.substr(slash);
    const std::string file = path.substr(path.rfind('/') + 1);
    if (file.rfind("libblas.so", 0) == 0 || file.rfind("libopenblas", 0) == 0 ||
        file.rfind("libmkl_rt", 0) == 0 || file.rfind("libblis", 0) == 0) {
      return path;
    }
  }
  return "";
}

}  // namespace tae::train
