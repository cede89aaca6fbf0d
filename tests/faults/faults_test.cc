// Fault injection through the real binaries: while a study runs, agents are killed with
// SIGKILL, taed is killed with SIGKILL and started again, and an agent is stopped (SIGSTOP)
// past the grace period. Afterwards every run has succeeded and, for every run, the stored
// metric steps and log lines are exactly those its final attempt emitted, each once.

#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/harness.h"
#include "tests/skip.h"

namespace tae::testing {
namespace {

// A command job that emits STEPS metric points (JSON on the fd, and a key=value stdout line)
// and one numbered log line per step, slowly enough for faults to land mid-run.
constexpr int kSteps = 30;
std::string JobScript() {
  return "#!/bin/sh\n"
         "i=1\n"
         "while [ $i -le " +
         std::to_string(kSteps) +
         " ]; do\n"
         "  echo \"{\\\"step\\\": $i, \\\"train/loss\\\": $i.5}\" >&$TAE_METRICS_FD\n"
         "  echo \"line $i step=$i rate=$i\"\n"
         "  i=$((i + 1))\n"
         "  sleep 0.1\n"
         "done\n";
}

std::string StudySpec(const std::string& name, int seeds) {
  std::string list;
  for (int i = 0; i < seeds; ++i) {
    list += (i ? ", " : "") + std::to_string(i);
  }
  return "name = \"" + name + "\"\n[train]\nseeds = [" + list +
         "]\n[resources]\nmax_attempts = 5\n[job]\ncode = \"job\"\ncommand = \"sh run.sh\"\n";
}

struct Counts {
  int runs = 0;
  int succeeded = 0;
  int lost_points = 0;
  int duplicate_points = 0;
  int duplicate_lines = 0;
  int missing_lines = 0;
};

// Checks every run of the experiment: metric steps 1..kSteps for each key exactly once, and
// each "line N" log line exactly once for the final attempt.
Counts Verify(Cluster& cluster, const std::string& experiment) {
  Counts counts;
  nlohmann::json runs = cluster.TaectlJson({"runs", experiment});
  counts.runs = static_cast<int>(runs.size());
  CommandResult exported = cluster.Taectl({"export", experiment, "--format", "csv"});
  REQUIRE(exported.exit_code == 0);
  std::map<std::pair<int64_t, std::string>, std::multiset<int64_t>> steps;
  std::istringstream csv(exported.out);
  std::string row;
  std::getline(csv, row);  // header
  while (std::getline(csv, row)) {
    std::vector<std::string> cells;
    std::stringstream fields(row);
    for (std::string cell; std::getline(fields, cell, ',');) {
      cells.push_back(cell);
    }
    REQUIRE(cells.size() >= 6);
    steps[{std::stoll(cells[0]), cells[3]}].insert(std::stoll(cells[4]));
  }
  for (const auto& run : runs) {
    const int64_t id = run.at("id");
    if (run.at("state") == "succeeded") {
      counts.succeeded += 1;
    }
    for (const char* key : {"train/loss", "rate"}) {
      const std::multiset<int64_t>& got = steps[{id, key}];
      for (int64_t s = 1; s <= kSteps; ++s) {
        const size_t n = got.count(s);
        counts.lost_points += n == 0 ? 1 : 0;
        counts.duplicate_points += n > 1 ? static_cast<int>(n - 1) : 0;
      }
    }
    // Log lines of the final attempt.
    const int attempt = run.at("attempt");
    CommandResult logs = cluster.Taectl({"logs", "r" + std::to_string(id), "--json"});
    std::map<int, int> seen;
    if (logs.exit_code == 0) {
      nlohmann::json lines = nlohmann::json::parse(logs.out, nullptr, false);
      for (const auto& line : lines) {
        if (line.value("attempt", 0) != attempt || line.value("stream", "") != "stdout") {
          continue;
        }
        const std::string text = line.value("text", "");
        if (text.rfind("line ", 0) == 0) {
          seen[std::stoi(text.substr(5))] += 1;
        }
      }
    }
    for (int s = 1; s <= kSteps; ++s) {
      counts.missing_lines += seen[s] == 0 ? 1 : 0;
      counts.duplicate_lines += seen[s] > 1 ? seen[s] - 1 : 0;
    }
  }
  return counts;
}

// Every run of the experiment succeeded, and its points and final attempt's lines are each there
// exactly once.
void CheckExactlyOnce(Cluster& cluster, const std::string& experiment, int runs) {
  Counts counts = Verify(cluster, experiment);
  CHECK(counts.runs == runs);
  CHECK(counts.succeeded == runs);
  CHECK(counts.lost_points == 0);
  CHECK(counts.duplicate_points == 0);
  CHECK(counts.missing_lines == 0);
  CHECK(counts.duplicate_lines == 0);
}

int64_t LastStep(Cluster& cluster, const std::string& experiment) {
  int64_t best = 0;
  for (const auto& run : cluster.TaectlJson({"runs", experiment})) {
    if (run.at("state") == "running") {
      best = std::max<int64_t>(best, run.value("last_step", 0));
    }
  }
  return best;
}

std::string Submit(Cluster& cluster, const std::string& name, int seeds) {
  std::filesystem::create_directories(cluster.dir().path() + "/job");
  cluster.dir().Write("job/run.sh", JobScript());
  const std::string spec = cluster.dir().Write(name + ".toml", StudySpec(name, seeds));
  nlohmann::json submitted = cluster.TaectlJson({"submit", spec});
  return std::to_string(submitted.at("experiment").get<int64_t>());
}

void WaitAllFinal(Cluster& cluster, const std::string& experiment) {
  CommandResult waited = cluster.Taectl({"wait", experiment, "--timeout", "240"}, 300);
  INFO(waited.err);
  CHECK(waited.exit_code == 0);
}

TEST_CASE("kill -9 of an agent mid-run loses and duplicates nothing") {
  setenv("TAE_AGENT_GRACE", "20", 1);
  Cluster cluster(1, 2);
  const std::string exp = Submit(cluster, "agent-kill", 4);
  int kills = 0;
  for (int round = 0; round < 3; ++round) {
    // Mid-run: some points are stored, more are to come.
    bool mid = WaitUntil([&] { return LastStep(cluster, exp) >= 5 + 8 * round; }, 120);
    if (!mid) {
      break;  // the study finished early; the rounds so far still count
    }
    // taed starts a new agent on the same work dir; it adopts the running jobs.
    REQUIRE(KillLocalAgent(cluster, "local-0"));
    kills += 1;
  }
  CHECK(kills >= 2);
  WaitAllFinal(cluster, exp);
  CheckExactlyOnce(cluster, exp, 4);
  // Adopted, not restarted: every run finished in its first attempt.
  for (const auto& run : cluster.TaectlJson({"runs", exp})) {
    CHECK(run.at("attempt") == 1);
  }
  WARN("agent kills: " << kills << ", runs: 4");
}

TEST_CASE("kill -9 of taed and a restart loses and duplicates nothing") {
  setenv("TAE_AGENT_GRACE", "20", 1);
  Cluster cluster(1, 2);
  const std::string exp = Submit(cluster, "taed-kill", 4);
  int kills = 0;
  for (int round = 0; round < 2; ++round) {
    bool mid = WaitUntil([&] { return LastStep(cluster, exp) >= 5 + 10 * round; }, 120);
    if (!mid) {
      break;
    }
    const long taed = FindProcess("taed", cluster.home());
    REQUIRE(taed > 0);
    REQUIRE(kill(static_cast<pid_t>(taed), SIGKILL) == 0);
    kills += 1;
    CHECK(WaitUntil([&] { return FindProcess("taed", cluster.home()) == 0; }, 30));
    CommandResult up = cluster.Taectl({"up", "--agents", "1", "--slots", "2"}, 120);
    INFO(up.err);
    REQUIRE(up.exit_code == 0);
  }
  CHECK(kills >= 1);
  WaitAllFinal(cluster, exp);
  CheckExactlyOnce(cluster, exp, 4);
  WARN("taed kills: " << kills << ", runs: 4");
}

TEST_CASE("an agent stopped past the grace period loses its runs to a new attempt") {
  setenv("TAE_AGENT_GRACE", "3", 1);
  setenv("TAE_AGENT_TIMEOUT", "3", 1);
  setenv("TAE_RETRY_BACKOFF", "0.5", 1);
  Cluster cluster(2, 1);
  unsetenv("TAE_AGENT_TIMEOUT");
  unsetenv("TAE_RETRY_BACKOFF");
  int stops = 0;
  for (int round = 0; round < 2; ++round) {
    // Each round stops the other agent.
    const std::string exp = Submit(cluster, "agent-stop-" + std::to_string(round), 4);
    REQUIRE(WaitUntil([&] { return LastStep(cluster, exp) >= 5; }, 120));
    const long agent =
        FindProcess("tae-agent", cluster.home() + "/agents/local-" + std::to_string(round));
    REQUIRE(agent > 0);
    REQUIRE(kill(static_cast<pid_t>(agent), SIGSTOP) == 0);
    stops += 1;
    // Its runs are declared lost and run again elsewhere.
    const bool requeued = WaitUntil(
        [&] {
          for (const auto& run : cluster.TaectlJson({"runs", exp})) {
            if (run.at("attempt") == 2) {
              return true;
            }
          }
          return false;
        },
        120);
    kill(static_cast<pid_t>(agent), SIGCONT);
    if (!requeued) {
      std::ifstream in(cluster.home() + "/logs/taed.log");
      std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      INFO("taed.log: " << log.substr(log.size() > 6000 ? log.size() - 6000 : 0));
      CHECK(requeued);
    }
    WaitAllFinal(cluster, exp);
    CheckExactlyOnce(cluster, exp, 4);
    // The stopped attempt's processes were cancelled once the agent came back.
    CHECK(WaitUntil([&] { return FindProcess("sh run.sh", cluster.home()) == 0; }, 30));
  }
  WARN("agent stops: " << stops << ", runs: 8");
}

// Lines the jobs under an agent work dir have written to their stdout files so far.
int JobLines(const std::string& work_dir) {
  int lines = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(work_dir + "/runs", ec)) {
    std::ifstream in(entry.path().string() + "/stdout");
    std::string line;
    while (std::getline(in, line)) {
      ++lines;
    }
  }
  return lines;
}

// A network namespace joined to this one by a veth pair: HOST_IP here, NS_IP inside.
struct NetNs {
  std::string name;
  std::string host_if;
  bool ok = false;
  std::string host_ip;
  std::string ns_ip;
  NetNs() {
    const std::string id = std::to_string(getpid() % 10000);
    name = "tae-f" + id;
    host_if = "taeh" + id;
    const int subnet = static_cast<int>(getpid() % 200) + 20;
    host_ip = "10.231." + std::to_string(subnet) + ".1";
    ns_ip = "10.231." + std::to_string(subnet) + ".2";
    ok = Ip({"netns", "add", name}) &&
         Ip({"link", "add", host_if, "type", "veth", "peer", "name", "taen" + id}) &&
         Ip({"link", "set", "taen" + id, "netns", name}) &&
         Ip({"addr", "add", host_ip + "/24", "dev", host_if}) &&
         Ip({"link", "set", host_if, "up"}) &&
         Ip({"-n", name, "addr", "add", ns_ip + "/24", "dev", "taen" + id}) &&
         Ip({"-n", name, "link", "set", "taen" + id, "up"}) &&
         Ip({"-n", name, "link", "set", "lo", "up"});
  }
  ~NetNs() {
    Ip({"link", "del", host_if});
    Ip({"netns", "del", name});
  }
  static bool Ip(std::vector<std::string> args) {
    args.insert(args.begin(), "/usr/sbin/ip");
    return RunCommand(args, 30).exit_code == 0;
  }
  bool SetLink(bool up) { return Ip({"link", "set", host_if, up ? "up" : "down"}); }
};

TEST_CASE("network cuts shorter than the grace period between taed and an agent lose nothing") {
  NetNs net;
  if (!net.ok) {
    WARN(
        "cannot create a network namespace here (not root, or no iproute2): the network cut "
        "was not injected");
    return;
  }
  TempDir certs;
  CommandResult made =
      RunCommand({"/bin/bash", std::string(TAE_SOURCE_DIR) + "/deploy/make-certs.sh", certs.path(),
                  net.host_ip},
                 60);
  REQUIRE(made.exit_code == 0);
  setenv("TAE_AGENT_GRACE", "60", 1);
  setenv("TAE_AGENT_TIMEOUT", "60", 1);
  setenv("TAE_AGENT_LISTEN", (net.host_ip + ":0").c_str(), 1);
  setenv("TAE_TLS_CERT", (certs.path() + "/server.pem").c_str(), 1);
  setenv("TAE_TLS_KEY", (certs.path() + "/server.key").c_str(), 1);
  Cluster cluster(0, 1);
  for (const char* name :
       {"TAE_AGENT_TIMEOUT", "TAE_AGENT_LISTEN", "TAE_TLS_CERT", "TAE_TLS_KEY"}) {
    unsetenv(name);
  }
  std::ifstream addr_file(cluster.home() + "/agent.addr");
  std::string addr;
  std::getline(addr_file, addr);
  const std::string port = addr.substr(addr.rfind(':') + 1);
  std::ifstream token_file(cluster.home() + "/agent.token");
  std::string token;
  std::getline(token_file, token);
  TempDir work;
  // The agent lives in the namespace and reaches taed only through the veth pair.
  std::thread agent([&] {
    RunCommand(
        {"/usr/bin/env", "TAE_AGENT_TOKEN=" + token, "/usr/sbin/ip", "netns", "exec", net.name,
         BinPath("tae-agent"), "--taed", net.host_ip + ":" + port, "--id", "ns-agent", "--slots",
         "2", "--work-dir", work.path(), "--tls-ca", certs.path() + "/ca.pem"},
        900);
  });
  struct StopAgent {
    std::thread* thread;
    ~StopAgent() {
      if (long pid = FindProcess("tae-agent", "ns-agent --slots"); pid > 0) {
        kill(static_cast<pid_t>(pid), SIGTERM);
      }
      thread->join();
    }
  } stop{&agent};
  REQUIRE(WaitUntil([&] { return cluster.TaectlJson({"agents"}).size() == 1; }, 60));
  const std::string exp = Submit(cluster, "net-cut", 4);
  int cuts = 0;
  for (int round = 0; round < 3; ++round) {
    if (!WaitUntil([&] { return LastStep(cluster, exp) >= 4 + 8 * round; }, 120)) {
      break;
    }
    REQUIRE(net.SetLink(false));
    cuts += 1;
    // The cut lasts until the jobs have written 10 more lines, which then reach taed late.
    const int written = JobLines(work.path());
    const int64_t at_cut = LastStep(cluster, exp);
    CHECK(WaitUntil([&] { return JobLines(work.path()) >= written + 10; }, 60));
    CHECK(LastStep(cluster, exp) <= at_cut + 1);  // (one batch may have been in flight)
    REQUIRE(net.SetLink(true));
  }
  CHECK(cuts >= 2);
  WaitAllFinal(cluster, exp);
  CheckExactlyOnce(cluster, exp, 4);
  for (const auto& run : cluster.TaectlJson({"runs", exp})) {
    CHECK(run.at("attempt") == 1);  // no cut lasted long enough to lose a run
  }
  WARN("network cuts: " << cuts);
}

// A tmpfs mounted on the test's TAE_HOME, unmounted at the end.
struct SmallDisk {
  std::string path;
  bool mounted = false;
  ~SmallDisk() {
    if (mounted) {
      umount2(path.c_str(), MNT_DETACH);
    }
  }
};

TEST_CASE("a full disk in taed's data dir stops ingestion until space returns and loses nothing") {
  setenv("TAE_AGENT_GRACE", "20", 1);
  SmallDisk disk;
  TempDir agents_elsewhere;
  TempDir logs_elsewhere;
  Cluster cluster(1, 2, [&](const std::string& home) {
    disk.path = home;
    disk.mounted = mount("tmpfs", home.c_str(), "tmpfs", 0, "size=24m,mode=0700") == 0;
    if (disk.mounted) {
      // Only taed's data is on the small disk; the agents keep their journals elsewhere.
      std::filesystem::create_symlink(agents_elsewhere.path(), home + "/agents");
      // And taed's log, which says when it refuses a batch.
      std::filesystem::create_directories(logs_elsewhere.path() + "/logs");
      std::filesystem::create_symlink(logs_elsewhere.path() + "/logs", home + "/logs");
    }
  });
  if (!disk.mounted) {
    TAE_SKIP("cannot mount a tmpfs here (not root?): the disk-full fault was not injected");
  }
  const std::string log = cluster.home() + "/logs/taed.log";
  auto refusals = [&] {
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    int n = 0;
    for (size_t at = 0; (at = text.find("ingest from local-0 failed", at)) != std::string::npos;
         ++at) {
      ++n;
    }
    return n;
  };
  int fills = 0;
  for (int round = 0; round < 2; ++round) {
    const std::string exp = Submit(cluster, "disk-full-" + std::to_string(round), 4);
    const int before = refusals();
    // Fill the disk: a ballast file takes what is left.
    const std::string ballast = cluster.home() + "/ballast";
    {
      std::ofstream out(ballast, std::ios::binary);
      std::string block(1 << 20, 'x');
      while (out.write(block.data(), block.size())) {
      }
    }
    std::ofstream(ballast + "2", std::ios::binary) << std::string(60000, 'y');  // the last bytes
    fills += 1;
    CHECK(WaitUntil([&] { return refusals() > before; }, 120));
    std::filesystem::remove(ballast);
    std::filesystem::remove(ballast + "2");
    WaitAllFinal(cluster, exp);
    CheckExactlyOnce(cluster, exp, 4);
  }
  WARN("disk fills: " << fills << ", runs: 8");
  CHECK(cluster.Taectl({"down"}).exit_code == 0);
}

}  // namespace
}  // namespace tae::testing
