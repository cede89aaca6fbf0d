#pragma once

// Spawn: fork/exec of a child in its own process group (or session), the one launcher of every
// program TAE starts and waits for: job supervisors (agent), agents (taed's local provider),
// taed (taectl up) and the programs the integration tests drive. Short-lived tools go through
// RunTool (tool.h); the only other fork is tae-job's own, of its job. Everything is prepared
// before fork; signals are blocked across it and reset to their defaults in the child, which only
// calls async-signal-safe functions.

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tae::process {

inline constexpr int kMetricsFd = 3;

struct SpawnRequest {
  std::vector<std::string> argv;                         // argv[0] is the path to execute
  std::string cwd;                                       // "": inherit
  std::vector<std::pair<std::string, std::string>> env;  // added to (and overriding) ours
  std::vector<std::string> env_remove;                   // variables not passed on
  std::string log_path;          // set: stdout and stderr append to this file, else pipes
  bool metrics_pipe = false;     // a pipe on fd 3, announced as TAE_METRICS_FD=3
  bool stdin_pipe = false;       // stdin is a pipe whose write end is returned (else /dev/null)
  bool die_with_parent = false;  // `death_signal` when the spawning process dies
  bool new_session = false;      // setsid(): a daemon, detached from our terminal
  int death_signal = 15;         // SIGTERM
};

struct SpawnedProcess {
  pid_t pid = 0;  // also the process group id (and the session id with new_session)
  int stdout_fd = -1;
  int stderr_fd = -1;
  int metrics_fd = -1;
  int stdin_fd = -1;  // write end (O_CLOEXEC) when stdin_pipe
};

absl::StatusOr<SpawnedProcess> Spawn(const SpawnRequest& request);

}  // namespace tae::process
