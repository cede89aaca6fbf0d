// The gcloud-tpu provider end to end: taed creates a v4-16 VM on the fake Cloud TPU API with the
// real gcloud, reads the workers' host keys from its guest attributes, and starts an agent on
// each worker through `gcloud compute tpus tpu-vm ssh`. The two workers are network namespaces
// on a bridge running Debian's sshd (the fake maps every new VM's workers to them and writes
// gcloud's key into their authorized_keys, as the guest agent would). A 2-host run trains there;
// taed, restarted, finds the VM and starts its agents again; preempting the VM kills everything
// in the namespaces, and the run comes back on a new VM.
// Needs root, iproute2, openssh-server, gcloud and python3; elsewhere it says it was skipped.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/integration/fake_tpu_api.h"
#include "tests/integration/harness.h"
#include "tests/integration/netns.h"
#include "tests/skip.h"

namespace tae::testing {
namespace {

// "ssh-ed25519 AAAA..." without the comment.
std::string KeyOnly(const std::string& line) {
  const size_t type_end = line.find(' ');
  const size_t key_end = line.find_first_of(" \n", type_end + 1);
  return line.substr(0, key_end);
}

// A tiny copy-task gang on both workers of one TPU VM.
std::string TpuSpec(const std::string& name, int steps, int checkpoint_every) {
  return CopyTaskSpec(name, 2, steps, checkpoint_every) + "labels = { accelerator = \"tpu\" }\n";
}

nlohmann::json OnlyRun(Cluster& cluster, const std::string& experiment) {
  nlohmann::json runs = cluster.TaectlJson({"runs", experiment});
  REQUIRE(runs.size() == 1);
  return runs[0];
}

// The connected agents, by id.
std::map<std::string, nlohmann::json> Agents(Cluster& cluster) {
  std::map<std::string, nlohmann::json> out;
  for (const nlohmann::json& agent : cluster.TaectlJson({"agents"})) {
    if (agent.at("state") != "lost") {
      out[agent.at("id").get<std::string>()] = agent;
    }
  }
  return out;
}

// The details of the provider events of `provider` (and `event`, when given), oldest first.
std::vector<std::string> Events(Cluster& cluster, const std::string& provider,
                                const std::string& event = "") {
  std::vector<std::string> out;
  // Held: a range-for over a member of a temporary outlives the temporary.
  const nlohmann::json shown = cluster.TaectlJson({"agents", "--provider"});
  for (const nlohmann::json& e : shown.at("provider_events")) {
    if (e.at("provider") == provider && (event.empty() || e.at("event") == event)) {
      out.push_back(e.at("subject").get<std::string>() + ": " + e.at("detail").get<std::string>());
    }
  }
  return out;
}

// The fake's nodes (short names).
std::vector<std::string> Nodes(const FakeTpu& fake) {
  std::vector<std::string> out;
  for (const nlohmann::json& node : fake.Control("GET", "nodes")) {
    const std::string name = node.at("name");
    out.push_back(name.substr(name.rfind('/') + 1));
  }
  return out;
}

size_t Count(const std::vector<std::string>& lines, const std::string& text) {
  size_t n = 0;
  for (const std::string& line : lines) {
    n += line.find(text) != std::string::npos ? 1 : 0;
  }
  return n;
}

}  // namespace

TEST_CASE(
    "a TPU pool starts an agent on every worker through gcloud ssh, a 2-host run trains there, "
    "a restarted taed finds the VM again, and a preempted VM's run finishes on a new VM",
    "[gcloud][tpu]") {
  FakeTpu fake;
  SKIP_WITHOUT_GCLOUD(fake);
  if (FindOnPath("ssh").empty() || access("/usr/sbin/sshd", X_OK) != 0) {
    TAE_SKIP("openssh-client or openssh-server is not installed");
  }
  Slice slice(2, "taet", "taetb", 234);
  if (!slice.ok()) {
    TAE_SKIP(
        "cannot create network namespaces here (not root, or no iproute2): " << slice.why_not());
  }
  TempDir work;
  std::vector<std::unique_ptr<NsSshd>> sshds;
  nlohmann::json workers = nlohmann::json::array();
  for (int i = 0; i < 2; ++i) {
    const std::string authorized = work.path() + "/authorized_keys" + std::to_string(i) + ".%u";
    sshds.push_back(std::make_unique<NsSshd>(slice.Netns(i), slice.HostIp(i), authorized));
    INFO(sshds.back()->why_not());
    REQUIRE(sshds.back()->ok());
    workers.push_back({{"ip", slice.HostIp(i)},
                       {"host_key", KeyOnly(sshds.back()->host_key_pub())},
                       {"authorized_keys", authorized},
                       {"netns", slice.Netns(i)},
                       {"keep_pid_file", sshds.back()->pid_file()}});
  }
  // Every v4-16 (2 workers) that becomes READY runs on these two namespaces.
  fake.Control("POST", "worker_template", {{"workers", workers}});

  // taed's environment: the fake's gcloud configuration, quick rounds and loss detection, and
  // TLS on its agent port (the tunnels still lead to a plaintext port on loopback).
  TempDir certs;
  REQUIRE(RunCommand({"/bin/bash", std::string(TAE_SOURCE_DIR) + "/deploy/make-certs.sh",
                      certs.path(), "127.0.0.1"},
                     60)
              .exit_code == 0);
  auto taed_env = [&](bool set) {
    std::vector<std::pair<std::string, std::string>> vars = {
        {"TAE_TPU_POLL", "0.5"},
        {"TAE_AGENT_GRACE", "2"},
        {"TAE_RETRY_BACKOFF", "0.2"},
        {"TAE_TLS_CERT", certs.path() + "/server.pem"},
        {"TAE_TLS_KEY", certs.path() + "/server.key"}};
    fake.SetEnv(set);
    for (const auto& [name, value] : vars) {
      if (set) {
        setenv(name.c_str(), value.c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  };
  taed_env(true);
  const std::string agents_dir = work.path() + "/agents";
  Cluster cluster(0, 1, [&](const std::string& home) {
    std::ofstream(home + "/tpu-pools.toml")
        << "[[pool]]\nname = \"v4\"\naccelerator_type = \"v4-16\"\nzones = [\"" << kZone
        << "\"]\nspot = true\nidle_timeout_s = 3600\nlabels = { accelerator = \"tpu\" }\n"
        << "work_dir = \"" << agents_dir << "\"\n";
  });
  taed_env(false);
  REQUIRE(cluster.started());
  INFO("taed log:\n" << ReadFile(cluster.home() + "/logs/taed.log"));

  // 1. A gang run that only TPU agents can take: a VM, then an agent on each worker.
  const std::string first = cluster.dir().Write("first.toml", TpuSpec("tpu-first", 40, 0));
  REQUIRE(cluster.Taectl({"submit", first}).exit_code == 0);
  const bool both = WaitUntil(
      [&] {
        auto agents = Agents(cluster);
        return agents.count("tae-v4-1-w0") == 1 && agents.count("tae-v4-1-w1") == 1;
      },
      180);
  INFO("provider events:\n" << nlohmann::json(Events(cluster, "gcloud-tpu")).dump(1));
  INFO("worker 0's session:\n" << ReadFile(cluster.home() + "/logs/tae-v4-1-w0.log"));
  REQUIRE(both);
  auto agents = Agents(cluster);
  for (int i = 0; i < 2; ++i) {
    const nlohmann::json& labels = agents.at("tae-v4-1-w" + std::to_string(i)).at("labels");
    INFO(labels.dump());
    CHECK(labels.at("slice") == "tae-v4-1");
    CHECK(labels.at("worker") == std::to_string(i));
    CHECK(labels.at("addr") == slice.HostIp(i));  // the worker's own address: MASTER_ADDR
    CHECK(labels.at("provider") == "gcloud-tpu");
    CHECK(labels.at("pool") == "v4");
  }
  CommandResult waited = cluster.Taectl({"wait", "tpu-first", "--timeout", "240"}, 300);
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);
  nlohmann::json run = OnlyRun(cluster, "tpu-first");
  CHECK(run.at("state") == "succeeded");
  const std::string shown =
      cluster.Taectl({"show", "r" + std::to_string(run.at("id").get<int64_t>())}).out;
  INFO(shown);
  CHECK(shown.find("tae-v4-1-w0, tae-v4-1-w1") != std::string::npos);

  // The sessions: gcloud's ssh with pinned host keys, the token never on a command line.
  const std::vector<std::string> starts = Events(cluster, "gcloud-tpu", "start");
  INFO(nlohmann::json(starts).dump(1));
  REQUIRE(Count(starts, "compute tpus tpu-vm ssh tae-v4-1 --zone " + std::string(kZone)) >= 2);
  CHECK(Count(starts, "--worker=0 --strict-host-key-checking=yes --command exec ") >= 1);
  CHECK(Count(starts, "--worker=1 --strict-host-key-checking=yes --command exec ") >= 1);
  CHECK(Count(starts, " -- -R 127.0.0.1:17733:127.0.0.1:") >= 2);
  const std::string token = ReadFile(cluster.home() + "/agent.token");
  REQUIRE(token.size() > 8);
  for (const std::string& line : Events(cluster, "gcloud-tpu")) {
    CHECK(line.find(token.substr(0, token.find('\n'))) == std::string::npos);
  }
  const std::string known = ReadFile(cluster.home() + "/tpu-ssh/.ssh/google_compute_known_hosts");
  INFO(known);
  for (int i = 0; i < 2; ++i) {
    CHECK(known.find("-" + std::to_string(i) + "-") != std::string::npos);
    CHECK(known.find(KeyOnly(sshds[i]->host_key_pub())) != std::string::npos);
  }

  // 2. taed stops (its agents with it; the VM stays) and starts again: it finds the READY VM
  // and starts its agents anew.
  const std::string first_node = fake.Describe("tae-v4-1").at("id");
  CommandResult down = cluster.Taectl({"down"});
  INFO(down.out << down.err);
  REQUIRE(down.exit_code == 0);
  CHECK(down.out.find("left running (billed while they exist): 1 TPU VM(s):\n  tae-v4-1  " +
                      std::string(kZone) + "  READY  (pool v4)") != std::string::npos);
  CHECK(FindProcess("tae-agent", "--id tae-v4-1-w0") == 0);
  CHECK(Nodes(fake) == std::vector<std::string>{"tae-v4-1"});
  taed_env(true);
  CommandResult up = cluster.Taectl({"up", "--agents", "0"}, 120);
  taed_env(false);
  INFO(up.out << up.err);
  REQUIRE(up.exit_code == 0);
  REQUIRE(WaitUntil(
      [&] {
        auto back = Agents(cluster);
        return back.count("tae-v4-1-w0") == 1 && back.count("tae-v4-1-w1") == 1;
      },
      120));
  CHECK(Count(Events(cluster, "gcloud-tpu", "create"), "tpu-vm create") == 0);

  // 3. Preemption mid-run: the fake kills every process on the workers (agents, jobs), taed
  // deletes the VM, creates another for the waiting run, starts its agents, and the run
  // finishes there as attempt 2.
  const std::string second = cluster.dir().Write("second.toml", TpuSpec("tpu-second", 400, 20));
  REQUIRE(cluster.Taectl({"submit", second}).exit_code == 0);
  REQUIRE(
      WaitUntil([&] { return OnlyRun(cluster, "tpu-second").value("last_step", 0) >= 40; }, 180));
  // Its checkpoints are on taed before the VM goes (rank 0 uploads each save).
  const std::string second_run =
      "r" + std::to_string(OnlyRun(cluster, "tpu-second").at("id").get<int64_t>());
  REQUIRE(WaitUntil(
      [&] {
        const nlohmann::json listed = cluster.TaectlJson({"checkpoints", second_run});
        return !listed.at("checkpoints").empty();
      },
      120));
  fake.Control("POST", "preempt", {{"zone", kZone}, {"node", "tae-v4-1"}});
  nlohmann::json killed = fake.Control("GET", "killed");
  INFO("killed: " << killed.dump());
  size_t pids = 0;
  for (const nlohmann::json& entry : killed) {
    pids += entry.at("pids").size();
  }
  CHECK(pids >= 4);  // at least an agent and a job per worker
  const bool recreated = WaitUntil(
      [&] {
        for (const nlohmann::json& node : fake.Control("GET", "nodes")) {
          if (node.at("name").get<std::string>().find("/tae-v4-1") != std::string::npos &&
              node.value("state", "") == "READY" && node.value("id", "") != first_node) {
            return true;
          }
        }
        return false;
      },
      180);
  REQUIRE(recreated);
  CommandResult again = cluster.Taectl({"wait", "tpu-second", "--timeout", "240"}, 300);
  INFO(again.out << again.err);
  REQUIRE(again.exit_code == 0);
  run = OnlyRun(cluster, "tpu-second");
  CHECK(run.at("state") == "succeeded");
  CHECK(run.at("attempt").get<int>() >= 2);
  // The new VM's agents got the uploaded checkpoint, and training went on from it.
  CommandResult second_logs = cluster.Taectl({"logs", second_run});
  const std::string second_text = second_logs.out + second_logs.err;
  INFO(second_text);
  CHECK(second_text.find("restored into TAE_CHECKPOINT_DIR") != std::string::npos);
  CHECK(second_text.find("resumed after step") != std::string::npos);
  const std::vector<std::string> all = Events(cluster, "gcloud-tpu");
  INFO(nlohmann::json(all).dump(1));
  CHECK(Count(all, "tae-v4-1: gcloud compute tpus tpu-vm delete tae-v4-1 --zone") >= 1);
  // This taed started agents on the first VM once (after the restart) and on the new VM once.
  CHECK(Count(all, "starting 2 agent(s) on node " + first_node) == 1);
  CHECK(Count(all, "starting 2 agent(s) on node ") == 2);

  // 4. The day is over: `taectl down --delete-vms` deletes the VM before taed exits.
  const nlohmann::json listed = cluster.TaectlJson({"agents", "--provider"}).at("vms");
  INFO(listed.dump());
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].at("name") == "tae-v4-1");
  CHECK(listed[0].at("state") == "READY");
  CommandResult last = cluster.Taectl({"down", "--delete-vms"}, 300);
  INFO(last.out << last.err);
  REQUIRE(last.exit_code == 0);
  CHECK(last.out.find("deleting 1 TPU VM(s):") != std::string::npos);
  CHECK(Nodes(fake).empty());
}

}  // namespace tae::testing
