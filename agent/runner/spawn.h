#pragma once

// Spawn: fork/exec of a job in a new process group with stdout, stderr and a metrics pipe
// (fd 3, TAE_METRICS_FD=3). Everything is prepared before fork; the child only calls
// async-signal-safe functions.

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tae::agent {

inline constexpr int kMetricsFd = 3;

struct SpawnRequest {
  std::vector<std::string> argv;
  std::string cwd;
  std::vector<std::pair<std::string, std::string>> env;  // added to (and overriding) ours
};

struct SpawnedProcess {
  pid_t pid = 0;  // also the process group id
  int stdout_fd = -1;
  int stderr_fd = -1;
  int metrics_fd = -1;
};

absl::StatusOr<SpawnedProcess> Spawn(const SpawnRequest& request);

}  // namespace tae::agent
