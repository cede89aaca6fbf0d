// Faults blamed on the right side, through the real binaries (docs/reliability.md): what breaks
// on the worker (its work dir removed under a live agent, its disk full) never ends a user's run
// as failed. The run is requeued on another agent without spending its attempts, resumes from
// its last checkpoint and succeeds; the broken agent is quarantined until `taectl agents
// undrain`.

#include <stdlib.h>
#include <sys/mount.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>
#include <string>

#include "tests/integration/harness.h"
#include "tests/skip.h"

namespace tae::testing {
namespace {

constexpr int kSteps = 200;

// A command job that checkpoints its step every 10 steps and resumes from it; with an argument,
// it first writes that many MiB of scratch data into its run directory.
constexpr char kJob[] = R"(import os, sys, time
import tae_log

scratch = int(sys.argv[2]) if len(sys.argv) > 2 else 0
with open("scratch.bin", "wb") as f:
    for _ in range(scratch):
        f.write(b"x" * (1 << 20))
        f.flush()
d = os.environ["TAE_CHECKPOINT_DIR"]
os.makedirs(d, exist_ok=True)
path = os.path.join(d, "step")
start = int(open(path).read()) if os.path.exists(path) else 0
print(f"resumed after step {start}", flush=True)
for step in range(start + 1, int(sys.argv[1]) + 1):
    tae_log.log(step=step, loss=1.0 / step)
    if step % 10 == 0:
        with open(path + ".tmp", "w") as f:
            f.write(str(step))
        os.replace(path + ".tmp", path)
        tae_log.checkpoint(step)
    time.sleep(0.02)
)";

std::string Submit(Cluster& cluster, const std::string& name, int seeds, int scratch_mib) {
  std::filesystem::create_directories(cluster.dir().path() + "/job");
  cluster.dir().Write("job/job.py", kJob);
  std::string list;
  for (int i = 0; i < seeds; ++i) {
    list += (i ? ", " : "") + std::to_string(i);
  }
  const std::string spec = cluster.dir().Write(
      name + ".toml", "name = \"" + name + "\"\n[train]\nseeds = [" + list +
                          "]\n[resources]\nmax_attempts = 1\n[job]\ncode = \"job\"\n"
                          "command = \"/usr/bin/python3 job.py " +
                          std::to_string(kSteps) + " " + std::to_string(scratch_mib) + "\"\n");
  return std::to_string(cluster.TaectlJson({"submit", spec}).at("experiment").get<int64_t>());
}

std::string Quarantine(Cluster& cluster, const std::string& agent_id) {
  for (const auto& agent : cluster.TaectlJson({"agents"})) {
    if (agent.at("id") == agent_id) {
      return agent.value("quarantine", "");
    }
  }
  return "";
}

// Every run of the experiment succeeded with the attempts it was given (max_attempts = 1), none
// of them on `bad`; returns the runs' logs.
std::string CheckSucceededElsewhere(Cluster& cluster, const std::string& exp,
                                    const std::string& bad) {
  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "240"}, 300);
  INFO(waited.out << waited.err);
  CHECK(waited.exit_code == 0);
  std::string logs;
  for (const auto& run : cluster.TaectlJson({"runs", exp})) {
    INFO(run.dump());
    CHECK(run.at("state") == "succeeded");
    CHECK(run.at("agent") != bad);
    const std::string r = "r" + std::to_string(run.at("id").get<int64_t>());
    logs += cluster.Taectl({"logs", r}).out;
    logs += cluster.Taectl({"show", r}).out;
  }
  return logs;
}

TEST_CASE(
    "a work dir removed under a live agent: the run resumes from its checkpoint on another "
    "agent and succeeds, the agent is quarantined",
    "[faults]") {
  setenv("TAE_RETRY_BACKOFF", "0.2", 1);
  Cluster cluster(2, 1);
  REQUIRE(cluster.started());
  const std::string exp = Submit(cluster, "workdir", 1, 0);
  std::string host;
  REQUIRE(WaitUntil(
      [&] {
        const auto run = cluster.TaectlJson({"runs", exp}).at(0);
        const std::string r = "r" + std::to_string(run.at("id").get<int64_t>());
        const auto listed = cluster.TaectlJson({"checkpoints", r}).at("checkpoints");
        host = run.value("agent", "");
        return !listed.empty() && listed.at(0).at("step").get<int64_t>() >= 30 &&
               run.at("state") == "running";
      },
      120));
  REQUIRE(!host.empty());
  std::filesystem::remove_all(cluster.home() + "/agents/" + host);

  const std::string logs = CheckSucceededElsewhere(cluster, exp, host);
  INFO(logs);
  std::smatch resumed;
  REQUIRE(std::regex_search(logs, resumed, std::regex(R"(resumed after step (\d+))")));
  // The first attempt printed "after step 0"; the one that finished resumed from a checkpoint.
  std::smatch last;
  std::string::const_iterator from = logs.begin();
  int64_t best = 0;
  while (std::regex_search(from, logs.end(), last, std::regex(R"(resumed after step (\d+))"))) {
    best = std::max<int64_t>(best, std::stoll(last[1]));
    from = last.suffix().first;
  }
  CHECK(best >= 30);
  CHECK(logs.find("not counted against max_attempts") != std::string::npos);
  const std::string why = Quarantine(cluster, host);
  INFO(why);
  CHECK(!why.empty());
  // undrain lifts it.
  CHECK(cluster.Taectl({"agents", "undrain", host}).exit_code == 0);
  CHECK(Quarantine(cluster, host).empty());
  CHECK(cluster.Taectl({"down"}).exit_code == 0);
}

struct SmallDisk {
  std::string path;
  bool mounted = false;
  ~SmallDisk() {
    if (mounted) {
      umount2(path.c_str(), MNT_DETACH);
    }
  }
};

TEST_CASE("a full disk on an agent: its runs succeed on another agent, it is quarantined",
          "[faults]") {
  setenv("TAE_RETRY_BACKOFF", "0.2", 1);
  SmallDisk disk;
  Cluster cluster(2, 1, [&](const std::string& home) {
    disk.path = home + "/agents/local-0";
    std::filesystem::create_directories(disk.path);
    disk.mounted = mount("tmpfs", disk.path.c_str(), "tmpfs", 0, "size=12m,mode=0700") == 0;
  });
  if (!disk.mounted) {
    TAE_SKIP("cannot mount a tmpfs here (not root?): the full disk was not injected");
  }
  REQUIRE(cluster.started());
  // Each job first writes 16 MiB: more than local-0's disk holds.
  const std::string exp = Submit(cluster, "diskfull", 2, 16);
  const std::string logs = CheckSucceededElsewhere(cluster, exp, "local-0");
  INFO(logs);
  CHECK(logs.find("not counted against max_attempts") != std::string::npos);
  const std::string why = Quarantine(cluster, "local-0");
  INFO(why);
  CHECK(!why.empty());
  CHECK(Quarantine(cluster, "local-1").empty());
  CHECK(cluster.Taectl({"down"}).exit_code == 0);
}

}  // namespace
}  // namespace tae::testing
