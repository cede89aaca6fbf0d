// taectl up / down: start taed in the background with local agents, and stop it.

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/commands/commands.h"
#include "client/rpc/control_client.h"
#include "common/cli/flags.h"
#include "common/cli/paths.h"
#include "common/fs/fs.h"
#include "common/process/spawn.h"
#include "proto/tae/v1/states.h"

namespace tae::client {
namespace {

int ReadPid(const std::string& home) {
  std::ifstream in(home + "/taed.pid");
  int pid = 0;
  in >> pid;
  return pid;
}

std::string Tail(const std::string& path, size_t max_bytes) {
  const std::string text = fs::ReadFile(path).value_or("");
  return text.size() > max_bytes ? text.substr(text.size() - max_bytes) : text;
}

// Starts taed detached from this terminal, logging to home/logs/taed.log. Returns its pid.
absl::StatusOr<pid_t> SpawnTaed(const CommandEnv& env, int agents, int slots,
                                const std::string& slice) {
  std::error_code ec;
  std::filesystem::create_directories(env.home + "/logs", ec);
  chmod(env.home.c_str(), 0700);
  const std::string binary =
      cli::AbsolutePath(cli::EnvOr("TAE_TAED_BINARY", env.binary_dir + "/taed"));
  std::string log_path = env.home + "/logs/taed.log";
  std::vector<std::string> args = {
      binary, "--home", env.home, "--agents", absl::StrCat(agents), "--slots", absl::StrCat(slots)};
  if (!slice.empty()) {
    args.push_back("--slice");
    args.push_back(slice);
  }
  process::SpawnRequest request;
  request.argv = std::move(args);
  request.log_path = log_path;
  request.new_session = true;  // outlives this terminal
  absl::StatusOr<process::SpawnedProcess> spawned = process::Spawn(request);
  if (!spawned.ok()) {
    return absl::Status(spawned.status().code(),
                        absl::StrCat("cannot start ", binary, ": ", spawned.status().message()));
  }
  return spawned->pid;
}

// Alive and not a zombie (a zombie's parent may never reap it, e.g. PID 1 in a container).
bool ProcessAlive(pid_t pid) {
  if (kill(pid, 0) != 0) {
    return false;
  }
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] != 'Z';
}

}  // namespace

int Up(const CommandEnv& env, const Args& args) {
  int agents = 1;
  int slots = 1;
  int timeout_s = 60;
  std::string slice;
  cli::FlagSet flags(
      "usage: taectl up [--agents N] [--slots S] [--slice NAME] [--timeout SEC]\n\n"
      "Starts taed in the background on $TAE_HOME with N local agents of S slots each, and\n"
      "waits until they are connected. Logs go to $TAE_HOME/logs/. With --slice the agents\n"
      "are one slice (labels slice=NAME, worker=0..N-1): a resources.hosts = N study runs as a\n"
      "gang on this machine, as it would on the N workers of a TPU VM.");
  flags.String("slice", &slice, "label the local agents as one slice of this name");
  flags.Int("agents", &agents, "local agents to start");
  flags.Int("slots", &slots, "run slots per agent (runs side by side; cores are shared)");
  flags.Int("timeout", &timeout_s, "seconds to wait for taed and its agents");
  Args rest;
  absl::Status parsed = flags.Parse(args, &rest);
  if (flags.help_requested()) {
    std::fputs(flags.Help().c_str(), stdout);
    return 0;
  }
  if (!parsed.ok()) {
    return Fail(parsed);
  }
  if (agents < 0 || slots < 1) {
    return Fail(absl::InvalidArgumentError("--agents must be >= 0 and --slots >= 1"));
  }
  if (!slice.empty() && (slice.size() > 63 || !std::all_of(slice.begin(), slice.end(), [](char c) {
                           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
                                  c == '_' || c == '.';
                         }))) {
    return Fail(absl::InvalidArgumentError(
        "--slice: a name of at most 63 letters, digits, '-', '_' and '.' (it becomes a label)"));
  }
  ControlClient client(env.home);
  if (client.Ping()) {
    std::printf(
        "taed already running on %s (pid %d); --agents/--slots apply at the next up "
        "(taectl down first)\n",
        env.home.c_str(), ReadPid(env.home));
    return 0;
  }
  absl::StatusOr<pid_t> pid = SpawnTaed(env, agents, slots, slice);
  if (!pid.ok()) {
    return Fail(pid.status());
  }
  std::fprintf(stderr, "starting taed (pid %d) on %s with %d local agent(s)...\n", *pid,
               env.home.c_str(), agents);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(*pid, &status, WNOHANG) == *pid) {
      std::fprintf(stderr, "taed exited during start-up; the end of %s/logs/taed.log:\n%s",
                   env.home.c_str(), Tail(env.home + "/logs/taed.log", 2000).c_str());
      return 1;
    }
    tae::v1::ListAgentsRequest request;
    tae::v1::ListAgentsResponse response;
    ControlClient fresh(env.home);  // a new channel: no reconnect backoff from earlier misses
    if (fresh.stub()->ListAgents(ControlClient::Context(2000).get(), request, &response).ok()) {
      int ready = 0;
      for (const tae::v1::AgentInfo& agent : response.agents()) {
        ready += agent.state() != tae::v1::AGENT_STATE_LOST ? 1 : 0;
      }
      if (ready >= agents) {
        std::printf("taed up (pid %d): %d agent(s) ready, data in %s\n", *pid, ready,
                    env.home.c_str());
        return 0;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::fprintf(stderr, "taectl: taed did not get %d agent(s) ready in %ds; see %s/logs/\n", agents,
               timeout_s, env.home.c_str());
  return 1;
}

int Down(const CommandEnv& env, const Args& args) {
  bool delete_vms = false;
  cli::FlagSet flags(
      "usage: taectl down [--delete-vms]\n\n"
      "Stops taed and the agents it started (their runs stop). Cloud VMs that taed's TPU pools\n"
      "created are left running (and billed) unless --delete-vms; either way they are listed.\n"
      "GKE slices (gke pools' JobSets and Secrets) are always deleted: without taed their agents\n"
      "would only hold the team's Kueue quota.");
  flags.Bool("delete-vms", &delete_vms,
             "also delete every TPU pool VM (and queued resource) before taed exits; waits for "
             "the deletions");
  Args rest;
  absl::Status parsed = flags.Parse(args, &rest);
  if (flags.help_requested()) {
    std::fputs(flags.Help().c_str(), stdout);
    return 0;
  }
  if (!parsed.ok()) {
    return Fail(parsed);
  }
  ControlClient client(env.home);
  tae::v1::ShutdownRequest request;
  request.set_delete_vms(delete_vms);
  tae::v1::ShutdownResponse response;
  grpc::Status status = client.stub()->Shutdown(ControlClient::Context().get(), request, &response);
  if (!status.ok()) {
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      std::printf("taed is not running on %s\n", env.home.c_str());
      return 0;
    }
    return Fail(client.Check(status));
  }
  pid_t pid = static_cast<pid_t>(response.pid());
  // GKE slices always go at down (docs/providers.md, "gke"); TPU VMs with --delete-vms.
  std::vector<const tae::v1::CloudVm*> vms;
  std::vector<const tae::v1::CloudVm*> slices;
  for (const tae::v1::CloudVm& vm : response.vms()) {
    (vm.provider() == "gke" ? slices : vms).push_back(&vm);
  }
  if (!slices.empty()) {
    std::printf("giving back %zu GKE slice(s) (their JobSets deleted):\n", slices.size());
    for (const tae::v1::CloudVm* slice : slices) {
      std::printf("  %s  namespace %s  %s  (pool %s)\n", slice->name().c_str(),
                  slice->zone().c_str(), slice->state().c_str(), slice->pool().c_str());
    }
  }
  if (!vms.empty()) {
    std::printf("%s %zu TPU VM(s):\n",
                delete_vms ? "deleting" : "left running (billed while they exist):", vms.size());
    for (const tae::v1::CloudVm* vm : vms) {
      std::printf("  %s  %s  %s  (pool %s)\n", vm->name().c_str(), vm->zone().c_str(),
                  vm->state().c_str(), vm->pool().c_str());
    }
    if (!delete_vms) {
      std::printf(
          "delete them with `taectl down --delete-vms` next time, or bash deploy/tpu/teardown.sh; "
          "a taed started again takes them back\n");
    }
  }
  // Deleting VMs takes the cloud a minute or two each; a cluster answers a delete in seconds.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(delete_vms       ? 1800
                                                                          : slices.empty() ? 30
                                                                                           : 300);
  while (ProcessAlive(pid) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (ProcessAlive(pid)) {
    std::fprintf(stderr, "taectl: taed (pid %d) is still stopping\n", pid);
    return 1;
  }
  std::printf("taed stopped (pid %d)\n", pid);
  return 0;
}

}  // namespace tae::client
