#pragma once

// taectl doctor's checks. Each check is a function of facts already gathered (file modes, agent
// facts, tool outputs), so the decisions are unit-tested without a machine that is broken in
// each way; doctor.cc does the gathering and the printing.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tae/v1/control.pb.h"

namespace tae::client::doctor {

enum class Level { kOk, kWarn, kFail };
const char* ToString(Level level);  // "ok", "warn", "FAIL"

struct Check {
  Level level = Level::kOk;
  std::string what;
  std::string fix;  // the command (or step) that fixes it; empty for ok
};

struct Group {
  std::string name;  // "this machine", "agent ID"
  std::vector<Check> checks;
  nlohmann::ordered_json detail;  // what --json adds (the agent and its facts)
};

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kDiskWarnBytes = 5 * kGiB;  // an overnight run's checkpoints and logs
constexpr uint64_t kDiskFailBytes = 1 * kGiB;

// "on HOST: " for commands that must run on an agent's machine; "" for this machine.
std::string OnHost(const std::string& host);

Check CheckTaed(bool reachable, const std::string& home, const std::string& up_command);
// mode: st_mode of $TAE_HOME (exists false: no such directory).
Check CheckHomeMode(const std::string& home, bool exists, mode_t mode);
// The Control socket: must be a socket, user-only.
Check CheckSocket(const std::string& path, bool exists, bool is_socket, mode_t mode,
                  bool reachable);
// $TAE_HOME/agent.token: user-only; env_token is $TAE_AGENT_TOKEN of this shell ("" if unset).
Check CheckToken(const std::string& path, bool exists, mode_t mode, const std::string& content,
                 const std::string& env_token, bool reachable);

// One configured TLS file (env var `var`, e.g. TAE_TLS_KEY) and what was found at its path.
struct TlsFile {
  std::string var;
  std::string path;
  bool readable = false;
  mode_t mode = 0;
  bool is_key = false;
};
std::vector<Check> CheckTls(const std::vector<TlsFile>& files);

Check CheckVersion(const std::string& who, const std::string& version,
                   const std::string& taectl_version, const std::string& fix);
Check CheckBlas(const std::string& blas_path, const std::string& host);
Check CheckTorch(const std::string& torch_path, const std::string& host);
// What train.engine = "torch" would run with: the interpreter, PyTorch, torch_xla, the device.
// A warning (not a failure) without PyTorch: only runs that ask for the torch engine need it.
Check CheckTorchEngine(const tae::v1::AgentFacts::TorchEngine& engine, const std::string& host);
Check CheckThreads(int cpu_count, int threads_per_run, int slots, const std::string& host);
Check CheckDisk(const tae::v1::AgentFacts::Dir& dir, const std::string& host);
Check DescribeAccelerators(const tae::v1::AgentFacts& facts);
// A label that asks for a TPU or GPU (accelerator=tpu-v4, gpu=a100, ...) on an agent that sees
// no such device: runs placed there would silently fall back to the CPU or fail.
std::vector<Check> CheckAcceleratorLabels(const std::map<std::string, std::string>& labels,
                                          const tae::v1::AgentFacts& facts,
                                          const std::string& host);

// The Google Cloud pool prerequisites. Nothing is checked (and nothing is returned) unless a
// gcloud pool is configured; then gcloud must be on PATH, logged in, and have a project.
std::vector<Check> CheckGcloud(bool pool_configured, int timeout_ms = 10000);

// taed's GKE pools (the file at `pools_path`, when it exists), each through the kubectl on PATH
// with the pool's context and namespace: kubectl itself, the cluster answering, the JobSet and
// Kueue APIs, the pool's LocalQueue, and that TAE may create and delete JobSets and Secrets
// there (`kubectl auth can-i`). Each failure comes with its fix.
std::vector<Check> CheckGke(const std::string& pools_path, int timeout_ms = 10000);
// `gcloud auth list --format=json` -> the active account, or "" when none is.
std::string ActiveGcloudAccount(const std::string& auth_list_json);

// The checks of one connected (or lost) agent.
Group AgentGroup(const tae::v1::AgentInfo& agent, const std::string& taectl_version);

// Exit status: 1 when any check failed, else 0.
int ExitCode(const std::vector<Group>& groups);
std::string RenderText(const std::vector<Group>& groups);
nlohmann::ordered_json RenderJson(const std::vector<Group>& groups);
nlohmann::ordered_json FactsJson(const tae::v1::AgentFacts& facts);

}  // namespace tae::client::doctor
