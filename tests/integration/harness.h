#pragma once

// Test harness for integration tests: runs the real binaries (taectl, which starts taed and its
// agents) against a temporary TAE_HOME, and waits on conditions with deadlines, never sleeps.

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/process/spawn.h"
#include "nlohmann/json.hpp"

namespace tae::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs argv to completion (its process group killed after timeout_s), capturing stdout and
// stderr. Started by process::Spawn, like every program TAE starts.
CommandResult RunCommand(const std::vector<std::string>& argv, double timeout_s = 120);
// The same with the rest of a SpawnRequest (a working directory, environment); its output is
// always captured, so request.log_path must be empty.
CommandResult RunCommand(const process::SpawnRequest& request, double timeout_s = 120);

std::string BinPath(const std::string& name);
// The first line of a file (an address, a token, a pid), or "" when it cannot be read.
std::string FirstLine(const std::string& path);

// A temporary directory, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

// taed with local agents on a fresh TAE_HOME, started by `taectl up`, stopped by `taectl down`.
class Cluster {
 public:
  // up_args: more arguments of `taectl up` (e.g. --slice NAME).
  explicit Cluster(int agents = 1, int slots = 2,
                   const std::function<void(const std::string& home)>& before_up = nullptr,
                   const std::vector<std::string>& up_args = {});
  ~Cluster();
  const std::string& home() const { return home_.path(); }
  const TempDir& dir() const { return home_; }
  bool started() const { return started_; }
  CommandResult Taectl(std::vector<std::string> args, double timeout_s = 300);
  // Runs `taectl ARGS --json` and parses stdout; fails the test on a bad exit or bad JSON.
  nlohmann::json TaectlJson(std::vector<std::string> args);
  std::string db_path() const { return home_.path() + "/tae.db"; }
  // kill -9 of taed (its agents and their jobs live on), then waits until it is gone. False if
  // it was not running or is still there after 30 s.
  bool KillTaed();

 private:
  TempDir home_;
  bool started_ = false;
};

// A tiny copy-task study of one run (seed 0): `hosts` hosts (a gang when more than 1), global
// batch 8, `steps` steps, a checkpoint every `checkpoint_every` steps (0: at the end). It ends
// in its [resources] table, so a caller may append more keys of it.
std::string CopyTaskSpec(const std::string& name, int hosts, int steps, int checkpoint_every);

// Polls pred every 50 ms until it holds or the deadline passes. Returns pred's last answer.
bool WaitUntil(const std::function<bool()>& pred, double timeout_s);

// The pid of a running process whose command line contains both `name` and `needle`, or 0.
long FindProcess(const std::string& name, const std::string& needle);

// kill -9 of the cluster's local agent `id` ("local-0"), then waits (up to 60 s) for taed to
// start the next one on the same work dir. False when none ran, or none came back.
bool KillLocalAgent(const Cluster& cluster, const std::string& id);

// True while any process is in process group pgid.
bool ProcessGroupExists(long pgid);

// SIGTERM to the process group of `pid` (a child this process spawned as a group leader), then
// SIGKILL if it has not exited within 10 s; reaps it.
void StopProcessGroup(long pid);

}  // namespace tae::testing
