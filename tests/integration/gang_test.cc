// Multi-host runs through the real binaries: taed on a bridge, two agents each in its own network
// namespace (one slice, workers 0 and 1), tae-train ranks meeting over the bridge with c10d.
// Needs root and iproute2 (network namespaces); elsewhere each test says it was skipped.

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/integration/harness.h"
#include "tests/integration/netns.h"
#include "tests/skip.h"

namespace tae::testing {
namespace {

// One tae-agent inside a namespace, labelled as worker `worker` of slice "s1".
class NsAgent {
 public:
  NsAgent(const Slice& slice, int worker, std::string taed, std::string token, std::string ca,
          std::string work_dir)
      : slice_(slice),
        worker_(worker),
        taed_(std::move(taed)),
        token_(std::move(token)),
        ca_(std::move(ca)),
        work_dir_(std::move(work_dir)) {
    Start();
  }
  ~NsAgent() { Stop(SIGTERM); }

  std::string id() const { return "gang-w" + std::to_string(worker_); }
  const std::string& work_dir() const { return work_dir_; }

  void Start() {
    thread_ = std::thread([this] {
      RunCommand(
          {"/usr/bin/env", "TAE_AGENT_TOKEN=" + token_, "/usr/sbin/ip", "netns", "exec",
           slice_.Netns(worker_), BinPath("tae-agent"), "--taed", taed_, "--id", id(), "--slots",
           "1", "--labels", "accelerator=cpu,slice=s1,worker=" + std::to_string(worker_),
           "--work-dir", work_dir_, "--tls-ca", ca_},
          900);
    });
  }
  // Signals the agent (not its jobs, which run under their own supervisors) and waits for it.
  void Stop(int signal) {
    if (!thread_.joinable()) {
      return;
    }
    if (long pid = FindProcess("tae-agent", "--id " + id() + " --slots"); pid > 0) {
      kill(static_cast<pid_t>(pid), signal);
    }
    thread_.join();
  }

 private:
  const Slice& slice_;
  const int worker_;
  const std::string taed_;
  const std::string token_;
  const std::string ca_;
  const std::string work_dir_;
  std::thread thread_;
};

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// taed listening on the bridge (TLS, as it must beyond loopback) and one agent per host.
struct GangCluster {
  Slice slice{2, "taeg", "taeb", 232};  // bridge taeb<id>, namespaces taeg<id>-i, 10.232.x
  TempDir certs;
  TempDir work;
  std::unique_ptr<Cluster> cluster;
  std::vector<std::unique_ptr<NsAgent>> agents;
  std::string taed_addr;
  std::string token;

  bool Up() {
    if (!slice.ok()) {
      return false;
    }
    CommandResult made =
        RunCommand({"/bin/bash", std::string(TAE_SOURCE_DIR) + "/deploy/make-certs.sh",
                    certs.path(), slice.bridge_ip()},
                   60);
    REQUIRE(made.exit_code == 0);
    setenv("TAE_AGENT_LISTEN", (slice.bridge_ip() + ":0").c_str(), 1);
    setenv("TAE_TLS_CERT", (certs.path() + "/server.pem").c_str(), 1);
    setenv("TAE_TLS_KEY", (certs.path() + "/server.key").c_str(), 1);
    setenv("TAE_AGENT_GRACE", "2", 1);
    setenv("TAE_RETRY_BACKOFF", "0.2", 1);
    cluster = std::make_unique<Cluster>(0, 1);
    for (const char* name : {"TAE_AGENT_LISTEN", "TAE_TLS_CERT", "TAE_TLS_KEY", "TAE_AGENT_GRACE",
                             "TAE_RETRY_BACKOFF"}) {
      unsetenv(name);
    }
    const std::string addr = ReadLine(cluster->home() + "/agent.addr");
    taed_addr = slice.bridge_ip() + ":" + addr.substr(addr.rfind(':') + 1);
    token = ReadLine(cluster->home() + "/agent.token");
    for (int i = 0; i < slice.hosts(); ++i) {
      agents.push_back(std::make_unique<NsAgent>(slice, i, taed_addr, token,
                                                 certs.path() + "/ca.pem",
                                                 work.path() + "/w" + std::to_string(i)));
    }
    REQUIRE(WaitUntil([&] { return c().TaectlJson({"agents"}).size() == 2; }, 60));
    return true;
  }
  ~GangCluster() {
    agents.clear();  // before taed goes
    cluster.reset();
  }
  Cluster& c() { return *cluster; }
};

std::string Submit(Cluster& cluster, const std::string& name, const std::string& spec) {
  const std::string path = cluster.dir().Write(name + ".toml", spec);
  return std::to_string(cluster.TaectlJson({"submit", path}).at("experiment").get<int64_t>());
}

nlohmann::json OnlyRun(Cluster& cluster, const std::string& experiment) {
  nlohmann::json runs = cluster.TaectlJson({"runs", experiment});
  REQUIRE(runs.size() == 1);
  return runs[0];
}

// metric -> step -> value, from `taectl export EXP --format json`.
std::map<std::string, std::map<int64_t, double>> Series(Cluster& cluster,
                                                        const std::string& experiment) {
  CommandResult exported = cluster.Taectl({"export", experiment, "--format", "json"});
  REQUIRE(exported.exit_code == 0);
  std::map<std::string, std::map<int64_t, double>> out;
  for (const nlohmann::json& series : nlohmann::json::parse(exported.out)) {
    auto& points = out[series.at("metric").get<std::string>()];
    for (size_t i = 0; i < series.at("steps").size(); ++i) {
      points[series["steps"][i].get<int64_t>()] = series["values"][i].get<double>();
    }
  }
  return out;
}

std::string Transitions(Cluster& cluster, int64_t run) {
  return cluster.Taectl({"show", "r" + std::to_string(run)}).out;
}

void WaitFinal(Cluster& cluster, const std::string& experiment) {
  CommandResult waited = cluster.Taectl({"wait", experiment, "--timeout", "240"}, 300);
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);
}

}  // namespace

TEST_CASE("a 2-host run in network namespaces trains the model a 1-host run trains", "[gang]") {
  GangCluster gang;
  if (!gang.Up()) {
    TAE_SKIP("cannot create network namespaces here (not root, or no iproute2)");
  }
  Cluster& cluster = gang.c();
  const std::string two = Submit(cluster, "two-hosts", CopyTaskSpec("two-hosts", 2, 30, 0));
  WaitFinal(cluster, two);
  const std::string one = Submit(cluster, "one-host", CopyTaskSpec("one-host", 1, 30, 0));
  WaitFinal(cluster, one);

  const nlohmann::json gang_run = OnlyRun(cluster, two);
  CHECK(gang_run.at("state") == "succeeded");
  const std::string shown = Transitions(cluster, gang_run.at("id").get<int64_t>());
  INFO(shown);
  CHECK(shown.find("placed on gang-w0, gang-w1 (ranks 0..1)") != std::string::npos);
  CHECK(shown.find("every host exited 0 (2 hosts)") != std::string::npos);
  CHECK(shown.find("world_size        2") != std::string::npos);
  CHECK(OnlyRun(cluster, one).at("state") == "succeeded");

  auto a = Series(cluster, one);
  auto b = Series(cluster, two);
  for (const char* key : {"train/loss", "eval/loss", "train/grad_norm"}) {
    INFO(key);
    REQUIRE(a[key].size() >= 3);
    REQUIRE(a[key].size() == b[key].size());
    for (const auto& [step, value] : a[key]) {
      INFO("step " << step);
      REQUIRE(b[key].count(step) == 1);
      CHECK(std::abs(b[key][step] - value) <= 1e-4 * std::abs(value));
    }
  }
  // The all-reduce between the namespaces, per step, as rank 0 measured it.
  const auto& allreduce = b["perf/allreduce_ms"];
  REQUIRE(!allreduce.empty());
  for (const auto& [step, ms] : allreduce) {
    WARN("2 hosts over a bridge, step "
         << step << ": all-reduce " << ms << " ms of a " << b["perf/step_ms"][step]
         << " ms step (1 host: " << a["perf/step_ms"][step] << " ms)");
  }
}

// CopyTaskSpec trained by the PyTorch engine (train.engine = "torch").
std::string TorchCopySpec(const std::string& name, int hosts) {
  std::string spec = CopyTaskSpec(name, hosts, 30, 0);
  spec.replace(spec.find("[train]\n"), 8, "[train]\nengine = \"torch\"\n");
  return spec;
}

TEST_CASE("the torch engine: a 2-host run trains the model a 1-host run trains", "[gang]") {
  if (RunCommand({"/usr/bin/python3", "-c", "import torch"}, 60).exit_code != 0) {
    TAE_SKIP("/usr/bin/python3 cannot import torch (apt-get install python3-torch)");
  }
  setenv("TAE_PYTHON", "/usr/bin/python3", 0);  // the agents' tae-train starts the engine with it
  GangCluster gang;
  if (!gang.Up()) {
    TAE_SKIP("cannot create network namespaces here (not root, or no iproute2)");
  }
  Cluster& cluster = gang.c();
  const std::string two = Submit(cluster, "torch-two", TorchCopySpec("torch-two", 2));
  WaitFinal(cluster, two);
  const std::string one = Submit(cluster, "torch-one", TorchCopySpec("torch-one", 1));
  WaitFinal(cluster, one);

  const nlohmann::json gang_run = OnlyRun(cluster, two);
  CHECK(gang_run.at("state") == "succeeded");
  const std::string shown = Transitions(cluster, gang_run.at("id").get<int64_t>());
  INFO(shown);
  CHECK(shown.find("every host exited 0 (2 hosts)") != std::string::npos);
  CHECK(shown.find("world_size        2") != std::string::npos);
  CHECK(shown.find("device") != std::string::npos);  // the torch engine's meta line
  CHECK(OnlyRun(cluster, one).at("state") == "succeeded");

  auto a = Series(cluster, one);
  auto b = Series(cluster, two);
  for (const char* key : {"train/loss", "eval/loss", "train/grad_norm"}) {
    INFO(key);
    REQUIRE(a[key].size() >= 3);
    REQUIRE(a[key].size() == b[key].size());
    for (const auto& [step, value] : a[key]) {
      INFO("step " << step);
      REQUIRE(b[key].count(step) == 1);
      CHECK(std::abs(b[key][step] - value) <= 1e-4 * std::abs(value));
    }
  }
}

TEST_CASE("cancelling a gang stops the processes on every host", "[gang]") {
  GangCluster gang;
  if (!gang.Up()) {
    TAE_SKIP("cannot create network namespaces here (not root, or no iproute2)");
  }
  Cluster& cluster = gang.c();
  const std::string exp = Submit(cluster, "long", CopyTaskSpec("long", 2, 1000000, 0));
  REQUIRE(WaitUntil([&] { return OnlyRun(cluster, exp).value("last_step", 0) >= 20; }, 120));
  const int64_t run = OnlyRun(cluster, exp).at("id").get<int64_t>();
  // Each host's job group, as its supervisor recorded it.
  std::vector<long> groups;
  for (const auto& agent : gang.agents) {
    const std::string pgid =
        ReadLine(agent->work_dir() + "/runs/r" + std::to_string(run) + "-a1.job/pgid");
    REQUIRE(!pgid.empty());
    groups.push_back(std::stol(pgid));
    CHECK(ProcessGroupExists(groups.back()));
  }
  REQUIRE(cluster.Taectl({"cancel", "r" + std::to_string(run)}).exit_code == 0);
  REQUIRE(WaitUntil([&] { return OnlyRun(cluster, exp).at("state") == "cancelled"; }, 60));
  for (long pgid : groups) {
    INFO("job group " << pgid);
    CHECK(WaitUntil([&] { return !ProcessGroupExists(pgid); }, 30));
  }
}

TEST_CASE("kill -9 of one host's agent requeues the whole gang and it resumes from its checkpoint",
          "[gang]") {
  GangCluster gang;
  if (!gang.Up()) {
    TAE_SKIP("cannot create network namespaces here (not root, or no iproute2)");
  }
  Cluster& cluster = gang.c();
  const std::string exp = Submit(cluster, "resume", CopyTaskSpec("resume", 2, 400, 20));
  REQUIRE(WaitUntil([&] { return OnlyRun(cluster, exp).value("last_step", 0) >= 60; }, 120));
  const int64_t run = OnlyRun(cluster, exp).at("id").get<int64_t>();
  const std::string rank0_group =
      ReadLine(gang.agents[0]->work_dir() + "/runs/r" + std::to_string(run) + "-a1.job/pgid");
  REQUIRE(!rank0_group.empty());

  gang.agents[1]->Stop(SIGKILL);  // rank 1's agent; its job lives on under its supervisor
  // After the grace period the gang is lost as a whole: rank 0 is stopped too.
  REQUIRE(WaitUntil(
      [&] {
        return OnlyRun(cluster, exp).at("attempt") == 1 &&
               OnlyRun(cluster, exp).at("state") == "queued";
      },
      60));
  CHECK(WaitUntil([&] { return !ProcessGroupExists(std::stol(rank0_group)); }, 30));
  // The host comes back: its agent adopts the old rank 1, taed stops it, and the gang starts
  // again on both hosts (attempt 2), resuming from rank 0's checkpoint.
  gang.agents[1]->Start();
  WaitFinal(cluster, exp);
  const nlohmann::json final_run = OnlyRun(cluster, exp);
  CHECK(final_run.at("state") == "succeeded");
  CHECK(final_run.at("attempt") == 2);
  CommandResult logs = cluster.Taectl({"logs", "r" + std::to_string(run)});
  INFO(logs.out);
  CHECK(logs.out.find("resumed after step") != std::string::npos);
  const std::string shown = Transitions(cluster, run);
  INFO(shown);
  CHECK(shown.find("agent gang-w1 lost") != std::string::npos);
}

}  // namespace tae::testing
