// taectl doctor: what a researcher needs before trusting an overnight run, checked for this
// machine and for every agent taed knows, each problem with the command that fixes it. The
// decisions are in doctor_checks.cc; this file gathers the facts and prints.

#include "client/commands/doctor.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "client/commands/common.h"
#include "client/rpc/control_client.h"
#include "common/cli/paths.h"
#include "common/fs/fs.h"
#include "common/host/host.h"
#include "common/version/version.h"

namespace tae::client {
namespace {

struct FileState {
  bool exists = false;
  mode_t mode = 0;
};

FileState Lstat(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    return {};
  }
  return {true, st.st_mode};
}

std::string ReadSmallFile(const std::string& path) {
  return fs::ReadFile(path).value_or("").substr(0, 4096);
}

// The TLS files named in this shell's environment: taed's (TAE_TLS_CERT, _KEY, _CLIENT_CA) and
// a remote agent's (TAE_TLS_CA). taectl cannot see the flags a running taed got, only these.
std::vector<doctor::TlsFile> TlsFiles() {
  std::vector<doctor::TlsFile> files;
  for (const char* var : {"TAE_TLS_CERT", "TAE_TLS_KEY", "TAE_TLS_CLIENT_CA", "TAE_TLS_CA"}) {
    std::string path = cli::EnvOr(var, "");
    if (path.empty()) {
      continue;
    }
    doctor::TlsFile file;
    file.var = var;
    file.path = path;
    file.readable = access(path.c_str(), R_OK) == 0;
    struct stat st {};
    if (stat(path.c_str(), &st) == 0) {
      file.mode = st.st_mode;
    }
    file.is_key = std::string(var) == "TAE_TLS_KEY";
    files.push_back(file);
  }
  return files;
}

doctor::Group ThisMachine(const CommandEnv& env, bool reachable, const grpc::Status& status,
                          int agent_count) {
  using doctor::Check;
  using doctor::Level;
  doctor::Group group;
  group.name = "this machine";
  group.checks.push_back({Level::kOk, absl::StrCat("taectl ", version::Project()), ""});

  const std::string up = env.home == cli::TaeHome()
                             ? std::string("taectl up")
                             : absl::StrCat("taectl --home ", env.home, " up");
  doctor::Check taed = doctor::CheckTaed(reachable, env.home, up);
  if (!reachable && status.error_code() != grpc::StatusCode::UNAVAILABLE) {
    absl::StrAppend(&taed.what, " (", status.error_message(), ")");
  }
  group.checks.push_back(taed);
  const std::string taed_binary = cli::EnvOr("TAE_TAED_BINARY", env.binary_dir + "/taed");
  if (access(taed_binary.c_str(), X_OK) != 0) {
    group.checks.push_back(
        {Level::kFail,
         absl::StrCat("no taed program at ", taed_binary, ": `taectl up` ", "cannot start it"),
         "install TAE so that taed is next to taectl (or set TAE_TAED_BINARY)"});
  } else if (reachable) {
    // taed has no version call yet; the agents it started locally come from the same install.
    group.checks.push_back({Level::kOk,
                            absl::StrCat("taed ", taed_binary, " (version not reported; ",
                                         "local agents show the install's)"),
                            ""});
  }
  if (reachable && agent_count == 0) {
    group.checks.push_back(
        {Level::kWarn, "taed has no agents: runs will wait in the queue",
         absl::StrCat("taectl down && ", up, " --agents 1 (or start tae-agent on a worker)")});
  }

  FileState home = Lstat(env.home);
  group.checks.push_back(
      doctor::CheckHomeMode(env.home, home.exists && S_ISDIR(home.mode), home.mode));
  const std::string socket_path = env.home + "/taed.sock";
  FileState socket = Lstat(socket_path);
  group.checks.push_back(doctor::CheckSocket(socket_path, socket.exists, S_ISSOCK(socket.mode),
                                             socket.mode, reachable));
  const std::string token_path = env.home + "/agent.token";
  FileState token = Lstat(token_path);
  group.checks.push_back(doctor::CheckToken(token_path, token.exists, token.mode,
                                            token.exists ? ReadSmallFile(token_path) : "",
                                            cli::EnvOr("TAE_AGENT_TOKEN", ""), reachable));
  for (Check& check : doctor::CheckTls(TlsFiles())) {
    group.checks.push_back(std::move(check));
  }

  host::GatherOptions gather;
  gather.dirs = {{"data", env.home}};
  tae::v1::AgentFacts facts = host::Gather(gather);
  group.checks.push_back(doctor::CheckThreads(facts.cpu_count(), 0, 0, ""));
  group.checks.push_back(doctor::CheckBlas(facts.blas(), ""));
  group.checks.push_back(doctor::CheckTorch(facts.torch(), ""));
  group.checks.push_back(doctor::CheckTorchEngine(facts.torch_engine(), ""));
  for (const tae::v1::AgentFacts::Dir& dir : facts.dirs()) {
    group.checks.push_back(doctor::CheckDisk(dir, ""));
  }
  group.checks.push_back(doctor::DescribeAccelerators(facts));
  for (const std::string& problem : facts.problems()) {
    group.checks.push_back({Level::kWarn, problem, ""});
  }
  // gcloud matters when taed has TPU pools: the file TAE_TPU_POOLS names, else the default one.
  const std::string pools = cli::EnvOr("TAE_TPU_POOLS", env.home + "/tpu-pools.toml");
  for (Check& check : doctor::CheckGcloud(access(pools.c_str(), F_OK) == 0)) {
    group.checks.push_back(std::move(check));
  }
  // kubectl and the cluster matter when taed has GKE pools.
  for (Check& check : doctor::CheckGke(cli::EnvOr("TAE_GKE_POOLS", env.home + "/gke-pools.toml"))) {
    group.checks.push_back(std::move(check));
  }
  group.detail = {{"home", env.home},
                  {"taectl_version", version::Project()},
                  {"taed_reachable", reachable},
                  {"facts", doctor::FactsJson(facts)}};
  return group;
}

}  // namespace

int Doctor(const CommandEnv& env, const Args& args) {
  bool json = false;
  cli::FlagSet flags(
      "usage: taectl doctor [--json]\n\n"
      "Checks what an overnight run needs, on this machine and on every agent taed knows:\n"
      "versions of taectl, taed and the agents; taed answering on $TAE_HOME; $TAE_HOME, its\n"
      "socket and the agent token private to you; TLS files named by TAE_TLS_*; CPUs and threads\n"
      "per run; the BLAS libtorch will load (OpenBLAS pthread, else matrix maths is ~50x slower);\n"
      "free disk in the data dir and each agent's work and cache dirs; the accelerators each\n"
      "agent sees (a TPU/GPU label without a visible device is a failure); and, when taed has\n"
      "TPU pools ($TAE_HOME/tpu-pools.toml or TAE_TPU_POOLS), that gcloud is logged in with a\n"
      "project; when it has GKE pools ($TAE_HOME/gke-pools.toml or TAE_GKE_POOLS), that kubectl\n"
      "reaches each pool's cluster, JobSet and Kueue are installed, its LocalQueue exists, and\n"
      "you may create and delete JobSets and Secrets there.\n\n"
      "Each line is ok, warn or FAIL; problems come with the command that fixes them. Exits 1\n"
      "when any check FAILs, else 0.");
  flags.Bool("json", &json, "print the checks as JSON: {ok, failures, warnings, groups}");
  Args rest;
  if (int code = ParseOrExit(flags, args, 0, 0, &rest); code >= 0) {
    return code;
  }
  ControlClient client(env.home);
  tae::v1::ListAgentsRequest request;
  tae::v1::ListAgentsResponse agents;
  grpc::Status status =
      client.stub()->ListAgents(ControlClient::Context(3000).get(), request, &agents);
  std::vector<doctor::Group> groups;
  groups.push_back(ThisMachine(env, status.ok(), status, agents.agents_size()));
  for (const tae::v1::AgentInfo& agent : agents.agents()) {
    groups.push_back(doctor::AgentGroup(agent, version::Project()));
  }
  if (json) {
    std::printf("%s\n", doctor::RenderJson(groups).dump(2).c_str());
  } else {
    std::fputs(doctor::RenderText(groups).c_str(), stdout);
  }
  return doctor::ExitCode(groups);
}

}  // namespace tae::client
