#pragma once

// The benchmark's child processes: commands run to completion and timed from spawn to reap
// (taectl), children whose stdout is read line by line (the simulated agents), and a real taed
// on a temporary TAE_HOME, started by `taectl up --agents 0` and stopped by `taectl down`.

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tae::bench {

// The directory of this executable: taed, taectl and the benchmark are built side by side.
std::string BinDir();

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal (or by the timeout)
  std::string out;
  std::string err;
  double seconds = 0;  // spawn to reap
};

// Runs argv to completion, killing it after timeout_s.
CommandResult RunCommand(const std::vector<std::string>& argv, double timeout_s = 120);

// A temporary directory under /tmp (short: unix socket paths are limited to 108 bytes), removed
// on destruction unless keep() was called.
class TempDir {
 public:
  static absl::StatusOr<std::unique_ptr<TempDir>> Make(const std::string& prefix);
  ~TempDir();
  const std::string& path() const { return path_; }
  void keep() { keep_ = true; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
  bool keep_ = false;
};

// A child whose stdout is consumed as lines; its stderr is passed on to ours, prefixed.
class LineChild {
 public:
  static absl::StatusOr<std::unique_ptr<LineChild>> Spawn(
      std::string name, const std::vector<std::string>& argv,
      const std::vector<std::pair<std::string, std::string>>& env);
  ~LineChild();  // kills and reaps a child that is still running

  // Waits up to timeout_ms for output from any of `children`, then reads what is there.
  static void Poll(const std::vector<LineChild*>& children, int timeout_ms);
  // The complete stdout lines read so far (removed from the buffer).
  std::vector<std::string> TakeLines();
  bool eof() const { return out_fd_ < 0 && err_fd_ < 0; }
  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  // Reaps the child (blocking up to timeout_s, then SIGKILL). Returns its exit code.
  int Wait(double timeout_s);

 private:
  LineChild(std::string name, pid_t pid, int out_fd, int err_fd)
      : name_(std::move(name)), pid_(pid), out_fd_(out_fd), err_fd_(err_fd) {}
  void ReadAvailable(int* fd, std::string* buffer, bool is_stderr);

  std::string name_;
  pid_t pid_;
  int out_fd_;
  int err_fd_;
  std::string out_buffer_;
  std::string err_buffer_;
  bool reaped_ = false;
};

// taed with no local agents on `home`, as `taectl up --agents 0` starts it.
class Taed {
 public:
  static absl::StatusOr<std::unique_ptr<Taed>> Up(const std::string& home);
  ~Taed();  // `taectl down` when still up
  absl::Status Down();

  CommandResult Taectl(std::vector<std::string> args, double timeout_s = 120) const;
  // The end of taed's log, for error messages.
  std::string LogTail() const;
  const std::string& home() const { return home_; }
  const std::string& agent_address() const { return agent_address_; }
  const std::string& agent_token() const { return agent_token_; }
  pid_t pid() const { return pid_; }

 private:
  explicit Taed(std::string home) : home_(std::move(home)) {}
  std::string home_;
  std::string agent_address_;
  std::string agent_token_;
  pid_t pid_ = 0;
  bool up_ = false;
};

// CPU seconds (user + system) process `pid` has used so far; 0 when it cannot be read.
double ProcessCpuSeconds(pid_t pid);

// CPU seconds the whole machine has been busy (all cores, /proc/stat: everything but idle and
// iowait), to tell how much of a measurement other processes took.
double MachineBusySeconds();

// BENCH_PRIORITY=1 (root only): Linux shares the CPUs between busy sessions ("autogroups")
// before nice applies, so on a shared box a benchmark gets ~1 of 2 cores while another session
// builds. Raise(pid) sets pid's autogroup to nice -19 (taed runs in its own session: `taectl up`
// calls setsid); the autogroup of this process is restored on destruction, others die with
// their process.
class AutogroupPriority {
 public:
  AutogroupPriority();  // enabled by BENCH_PRIORITY=1; raises this process's own autogroup
  ~AutogroupPriority();
  void Raise(pid_t pid) const;
  std::string Describe() const;

 private:
  bool enabled_ = false;
  std::string previous_;  // our autogroup's nice before, to restore
};

// Seconds on the steady clock (CLOCK_MONOTONIC: comparable between processes).
double SteadyNow();

}  // namespace tae::bench
