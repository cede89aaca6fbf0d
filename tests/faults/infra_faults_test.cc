// Faults blamed on the right side, through the real binaries (docs/reliability.md): what breaks
// on the worker (its work dir removed under a live agent, its disk full) never ends a user's run
// as failed. The run is requeued on another agent without spending its attempts, resumes from
// its last checkpoint and succeeds; the broken agent is quarantined until `taectl agents
// undrain`.

#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
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
  // The 12 MiB tmpfs as local-0's work dir under `home` (a Cluster's before_up).
  void MountFor(const std::string& home) {
    path = home + "/agents/local-0";
    std::filesystem::create_directories(path);
    mounted = mount("tmpfs", path.c_str(), "tmpfs", 0, "size=12m,mode=0700") == 0;
  }
  ~SmallDisk() {
    if (mounted) {
      umount2(path.c_str(), MNT_DETACH);
    }
  }
};

TEST_CASE(
    "a disk that something else filled: the runs succeed on another agent, the agent is "
    "quarantined",
    "[faults]") {
  setenv("TAE_RETRY_BACKOFF", "0.2", 1);
  SmallDisk disk;
  Cluster cluster(2, 1, [&](const std::string& home) { disk.MountFor(home); });
  if (!disk.mounted) {
    TAE_SKIP("cannot mount a tmpfs here (not root?): the full disk was not injected");
  }
  REQUIRE(cluster.started());
  // A ballast file outside every run's directories leaves under 1 MiB (full, by the agent's
  // measure) but room for the agent's journal: no job wrote it.
  {
    std::ofstream ballast(disk.path + "/ballast", std::ios::binary);
    const std::string kib(1 << 10, 'b');
    for (int i = 0; i < 11 * 1024 + 300; ++i) {
      ballast.write(kib.data(), static_cast<std::streamsize>(kib.size()));
    }
  }
  // Each job writes 1 MiB of scratch first: more than is left.
  const std::string exp = Submit(cluster, "diskfull", 2, 1);
  const std::string logs = CheckSucceededElsewhere(cluster, exp, "local-0");
  INFO(logs);
  CHECK(logs.find("not counted against max_attempts") != std::string::npos);
  // Named as the cause whichever the agent saw first: the job's exit on the full disk, or its
  // journal failing on it at a heartbeat.
  CHECK((logs.find("the worker's disk was full before the job started") != std::string::npos ||
         logs.find("the worker's disk is full (") != std::string::npos));
  const std::string why = Quarantine(cluster, "local-0");
  INFO(why);
  CHECK(!why.empty());
  CHECK(Quarantine(cluster, "local-1").empty());
  CHECK(cluster.Taectl({"down"}).exit_code == 0);
}

// A job whose own writes fill the disk: `hog` writes until the disk is full, holds it a moment,
// and fails; `steady` writes a new 4 KiB file every step and fails when a write does.
constexpr char kDiskJobs[] = R"(import os, sys, time
import tae_log

if sys.argv[1] == "hog":
    try:
        with open("hog.bin", "wb") as f:
            while True:
                f.write(b"h" * (1 << 16))
                f.flush()
    except OSError as e:
        print(f"hog: {e}", flush=True)
    time.sleep(2)
    sys.exit(1)
steps = int(sys.argv[2])
for step in range(1, steps + 1):
    with open(f"steady-{step}.bin", "wb") as f:  # a new block every step
        f.write(b"s" * 4096)
        f.flush()
        os.fsync(f.fileno())
    tae_log.log(step=step, loss=1.0 / step)
    time.sleep(0.05)
)";

TEST_CASE(
    "a job that fills the disk is stopped and fails as its own fault, the job beside it finishes, "
    "no agent is quarantined",
    "[faults]") {
  setenv("TAE_RETRY_BACKOFF", "0.2", 1);
  SmallDisk disk;
  Cluster cluster(1, 2, [&](const std::string& home) { disk.MountFor(home); });
  if (!disk.mounted) {
    TAE_SKIP("cannot mount a tmpfs here (not root?): the full disk was not injected");
  }
  REQUIRE(cluster.started());
  std::filesystem::create_directories(cluster.dir().path() + "/disk");
  cluster.dir().Write("disk/jobs.py", kDiskJobs);
  auto submit = [&](const std::string& name, const std::string& args) {
    const std::string spec = cluster.dir().Write(
        name + ".toml",
        "name = \"" + name +
            "\"\n[train]\nseeds = [0]\n[resources]\nmax_attempts = 1\n[job]\ncode = \"disk\"\n"
            "command = \"/usr/bin/python3 jobs.py " +
            args + "\"\n");
    return std::to_string(cluster.TaectlJson({"submit", spec}).at("experiment").get<int64_t>());
  };
  const std::string steady = submit("steady", "steady 200");
  REQUIRE(WaitUntil(
      [&] {
        return cluster.TaectlJson({"runs", steady}).at(0).value("last_step", 0) >= 5;
      },
      120));
  const std::string hog = submit("hog", "hog");
  CommandResult waited_hog = cluster.Taectl({"wait", hog, "--timeout", "120"}, 180);
  CommandResult waited = cluster.Taectl({"wait", steady, "--timeout", "120"}, 180);
  INFO(waited_hog.out << waited.out << waited.err);
  const nlohmann::json hog_run = cluster.TaectlJson({"runs", hog}).at(0);
  const nlohmann::json steady_run = cluster.TaectlJson({"runs", steady}).at(0);
  const std::string hog_shown =
      cluster.Taectl({"show", "r" + std::to_string(hog_run.at("id").get<int64_t>())}).out;
  const std::string steady_shown =
      cluster.Taectl({"show", "r" + std::to_string(steady_run.at("id").get<int64_t>())}).out;
  INFO(hog_shown << steady_shown);
  // The hog: failed, saying how much it wrote.
  CHECK(hog_run.at("state") == "failed");
  CHECK(hog_shown.find("it filled the worker's disk: it wrote") != std::string::npos);
  // The steady job finished with its one attempt. The agent stops a job that filled the disk as
  // soon as a write fails (its journal's, or a job's), so the steady job is hurt only when one of
  // its writes came first: then it was requeued as another job's doing, not counted.
  CHECK(steady_run.at("state") == "succeeded");
  const bool hurt = steady_shown.find("lost") != std::string::npos;
  WARN("the steady job " << (hurt ? "was hurt and requeued" : "was not hurt"));
  if (hurt) {
    CHECK(steady_shown.find("filled by run r" + std::to_string(hog_run.at("id").get<int64_t>())) !=
          std::string::npos);
    CHECK(steady_shown.find("not counted against max_attempts") != std::string::npos);
  }
  CHECK(Quarantine(cluster, "local-0").empty());
  CHECK(cluster.Taectl({"down"}).exit_code == 0);
}

TEST_CASE("a job that writes past resources.max_disk is stopped and fails, the agent is not blamed",
          "[faults]") {
  Cluster cluster(1, 1);
  REQUIRE(cluster.started());
  std::filesystem::create_directories(cluster.dir().path() + "/big");
  cluster.dir().Write("big/big.py", R"(import time
with open("big.bin", "wb") as f:
    for _ in range(8):
        f.write(b"x" * (1 << 20))
        f.flush()
print("wrote 8 MiB", flush=True)
time.sleep(60)
)");
  const std::string spec =
      cluster.dir().Write("big.toml",
                          "name = \"big\"\n[train]\nseeds = [0]\n[resources]\nmax_disk = "
                          "\"2MB\"\n[job]\ncode = \"big\"\n"
                          "command = \"/usr/bin/python3 big.py\"\n");
  const std::string exp =
      std::to_string(cluster.TaectlJson({"submit", spec}).at("experiment").get<int64_t>());
  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "120"}, 180);
  const nlohmann::json run = cluster.TaectlJson({"runs", exp}).at(0);
  const std::string r = "r" + std::to_string(run.at("id").get<int64_t>());
  const std::string shown = cluster.Taectl({"show", r}).out;
  INFO(waited.out << waited.err << shown);
  CHECK(run.at("state") == "failed");
  CHECK(run.at("attempt") == 1);
  CHECK(shown.find("more than resources.max_disk = 2.0 MB") != std::string::npos);
  CHECK(Quarantine(cluster, "local-0").empty());
  // Its directory went once taed had its exit: the space is back.
  CHECK(WaitUntil(
      [&] {
        return !std::filesystem::exists(cluster.home() + "/agents/local-0/runs/" + r + "-a1");
      },
      30));
  CHECK(cluster.Taectl({"down"}).exit_code == 0);
}

// A 2-host command job: rank 1 records its pid and run directory, then works until killed;
// rank 0 fails as a collective does once its peer is gone. A later attempt just succeeds.
constexpr char kGangJob[] = R"(import os, sys, time

rank = int(os.environ["TAE_RANK"])
shared = sys.argv[1]
if int(os.environ["TAE_ATTEMPT"]) > 1:
    print(f"rank {rank}: attempt {os.environ['TAE_ATTEMPT']} done", flush=True)
    sys.exit(0)
path = os.path.join(shared, "rank1")
if rank == 1:
    with open(path + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {os.environ['TAE_RUN_DIR']}")
    os.replace(path + ".tmp", path)
    while True:
        time.sleep(0.05)
while not os.path.exists(path):
    time.sleep(0.05)
pid = int(open(path).read().split()[0])
while True:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break
    time.sleep(0.05)
print("collective error: connection to rank 1 reset by peer", file=sys.stderr, flush=True)
sys.exit(1)
)";

TEST_CASE(
    "a gang whose host disappears for good while the other rank fails with a collective error "
    "is requeued and succeeds",
    "[faults]") {
  // A host that goes silent is treated as gone after 3 s, and lost 2 s later.
  setenv("TAE_AGENT_TIMEOUT", "3", 1);
  setenv("TAE_AGENT_GRACE", "2", 1);
  setenv("TAE_RETRY_BACKOFF", "0.2", 1);
  Cluster cluster(3, 1, nullptr, {"--slice", "local"});
  unsetenv("TAE_AGENT_TIMEOUT");
  unsetenv("TAE_AGENT_GRACE");
  REQUIRE(cluster.started());
  TempDir shared;
  std::filesystem::create_directories(cluster.dir().path() + "/gang");
  cluster.dir().Write("gang/gang.py", kGangJob);
  const std::string spec = cluster.dir().Write(
      "gang.toml",
      "name = \"gang\"\n[train]\nseeds = [0]\n[resources]\nhosts = 2\nmax_attempts = 1\n[job]\n"
      "code = \"gang\"\ncommand = \"/usr/bin/python3 gang.py " +
          shared.path() + "\"\n");
  const std::string exp =
      std::to_string(cluster.TaectlJson({"submit", spec}).at("experiment").get<int64_t>());
  REQUIRE(WaitUntil([&] { return std::filesystem::exists(shared.path() + "/rank1"); }, 120));
  std::ifstream in(shared.path() + "/rank1");
  long pid = 0;
  std::string run_dir;
  in >> pid >> run_dir;
  // .../agents/<id>/runs/r<N>-a1: the host of rank 1.
  std::smatch host;
  REQUIRE(std::regex_search(run_dir, host, std::regex(R"(/agents/([^/]+)/runs/)")));
  const std::string lost = host[1];
  const std::string work_dir = cluster.home() + "/agents/" + lost;
  const long agent = FindProcess("tae-agent", work_dir);
  REQUIRE(agent > 0);
  // The host goes away for good, as a preempted VM does: its agent silent (stopped, not exited,
  // so nothing restarts it), its job killed, its disk gone.
  REQUIRE(kill(static_cast<pid_t>(agent), SIGSTOP) == 0);
  const std::string pgid_path = run_dir + ".job/pgid";
  std::ifstream pgid_in(pgid_path);
  long pgid = 0;
  pgid_in >> pgid;
  REQUIRE(pgid > 0);
  kill(static_cast<pid_t>(-pgid), SIGKILL);
  // The job's supervisor may be writing the exit file (a temporary then a rename) while the
  // directory goes: a removal that meets a file renamed away under it is tried again.
  std::error_code removed;
  for (int tries = 0; tries < 100 && std::filesystem::exists(work_dir + "/runs"); ++tries) {
    std::filesystem::remove_all(work_dir + "/runs", removed);
  }
  REQUIRE_FALSE(std::filesystem::exists(work_dir + "/runs"));

  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "120"}, 180);
  const nlohmann::json run = cluster.TaectlJson({"runs", exp}).at(0);
  const std::string shown =
      cluster.Taectl({"show", "r" + std::to_string(run.at("id").get<int64_t>())}).out;
  INFO(waited.out << waited.err << shown);
  kill(static_cast<pid_t>(agent), SIGKILL);  // the stopped agent goes for good
  kill(static_cast<pid_t>(agent), SIGCONT);
  CHECK(run.at("state") == "succeeded");
  CHECK(run.at("attempt") == 2);
  // Rank 0's failure came first, and is put down to the lost host; the attempt is not counted.
  CHECK(shown.find("exit code 1") != std::string::npos);
  CHECK(shown.find("that failure is put down to this") != std::string::npos);
  CHECK(shown.find("not counted against max_attempts") != std::string::npos);
  CHECK(cluster.Taectl({"down"}).exit_code == 0);
}

}  // namespace
}  // namespace tae::testing
