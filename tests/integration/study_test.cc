// End to end through the real binaries: taectl up starts taed and a local agent on a temp
// TAE_HOME; a tiny study runs real tae-train processes; results are checked in the SQLite file.

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include "server/store/db.h"
#include "tests/integration/harness.h"
#include "tests/skip.h"

namespace tae::testing {
namespace {

constexpr const char* kTinyStudy = R"(name = "tiny"
[model]
layers = 1
d_model = 16
heads = 2
[train]
steps = 60
eval_every = 20
warmup = 10
seeds = [0, 1]
[[ablation]]
name = "no-attn"
"model.drop_attention_layers" = [0]
)";

std::vector<int64_t> Steps(store::Db& db, int64_t run_id, const std::string& key) {
  auto stmt = db.Prepare(
      "SELECT m.step FROM metrics m JOIN metric_keys k ON k.id = m.key_id WHERE m.run_id = ? "
      "AND k.name = ? ORDER BY m.step");
  REQUIRE(stmt.ok());
  stmt->Bind(1, run_id).Bind(2, key);
  std::vector<int64_t> steps;
  while (*stmt->Step()) {
    steps.push_back(stmt->Int(0));
  }
  return steps;
}

}  // namespace

TEST_CASE("a study runs end to end and its metrics land in SQLite with the expected steps") {
  Cluster cluster(1, 2);
  std::string spec = cluster.dir().Write("tiny.toml", kTinyStudy);

  CommandResult submit = cluster.Taectl({"submit", spec, "--wait", "--json"}, 300);
  INFO("submit stderr: " << submit.err);
  REQUIRE(submit.exit_code == 0);
  nlohmann::json submitted = nlohmann::json::parse(submit.out);
  int64_t exp_id = submitted.at("experiment").get<int64_t>();
  CHECK(submitted.at("state") == "succeeded");
  CHECK(submit.err.find("4/4 done") != std::string::npos);  // progress went to stderr

  // tae-train's runtime (its meta line) is stored as each run's metadata. The agent gives a run
  // cores / slots threads (agent/main.cc; 2 slots here) and tae-train uses them all.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string threads_per_run = std::to_string(std::max(1, cores / 2));

  nlohmann::json runs = cluster.TaectlJson({"runs", std::to_string(exp_id)});
  REQUIRE(runs.size() == 4);
  std::set<std::string> variants;
  for (const auto& run : runs) {
    CHECK(run.at("state") == "succeeded");
    CHECK(run.at("attempt") == 1);
    CHECK(run.at("last_step") == 60);
    CHECK(run.at("meta").value("threads", "") == threads_per_run);
    variants.insert(run.at("variant").get<std::string>());
  }
  CHECK(variants == std::set<std::string>{"baseline", "no-attn"});

  const std::string first_run = "r" + std::to_string(runs[0].at("id").get<int64_t>());
  nlohmann::json meta = cluster.TaectlJson({"show", first_run}).at("meta");
  INFO("meta: " << meta.dump());
  CHECK_FALSE(meta.value("libtorch", "").empty());
  CHECK_FALSE(meta.value("blas", "").empty());
  CHECK(meta.value("threads", "") == threads_per_run);
  CommandResult shown = cluster.Taectl({"show", first_run});
  CHECK(shown.exit_code == 0);
  CHECK(shown.out.find("runtime:") != std::string::npos);
  CHECK(shown.out.find("  libtorch ") != std::string::npos);
  CHECK(shown.out.find(" " + meta.value("libtorch", "?") + "\n") != std::string::npos);

  auto db = store::Db::Open(cluster.db_path());
  REQUIRE(db.ok());
  for (const auto& run : runs) {
    int64_t run_id = run.at("id").get<int64_t>();
    CHECK(Steps(*db, run_id, "eval/loss") == std::vector<int64_t>{20, 40, 60});
    CHECK(Steps(*db, run_id, "eval/acc") == std::vector<int64_t>{20, 40, 60});
    std::vector<int64_t> train = Steps(*db, run_id, "train/loss");
    REQUIRE_FALSE(train.empty());
    CHECK(train.back() == 60);
    CHECK(Steps(*db, run_id, "model/params").size() == 1);
  }
  // The ablated model really has fewer parameters.
  auto params = db->Prepare(
      "SELECT r.variant, MIN(m.value) FROM metrics m JOIN metric_keys k ON k.id = m.key_id "
      "JOIN runs r ON r.id = m.run_id WHERE k.name = 'model/params' GROUP BY r.variant "
      "ORDER BY r.variant");
  REQUIRE(params.ok());
  REQUIRE(*params->Step());
  double baseline_params = params->Double(1);
  REQUIRE(*params->Step());
  double ablated_params = params->Double(1);
  CHECK(ablated_params < baseline_params);

  nlohmann::json report = cluster.TaectlJson({"report", std::to_string(exp_id)});
  CHECK(report.at("experiment") == exp_id);
  REQUIRE(report.at("rows").size() == 2);
  const auto& base = report.at("rows")[0];
  CHECK(base.at("variant") == "baseline");
  CHECK(base.at("runs") == 2);
  CHECK(base.at("metrics").at("eval/loss").at("delta").get<double>() == 0.0);
  const auto& ablated = report.at("rows")[1];
  CHECK(ablated.at("variant") == "no-attn");
  double mean = ablated.at("metrics").at("eval/loss").at("mean").get<double>();
  double base_mean = base.at("metrics").at("eval/loss").at("mean").get<double>();
  CHECK(ablated.at("metrics").at("eval/loss").at("delta").get<double>() ==
        Approx(mean - base_mean));

  // Logs of a run came back too.
  CommandResult logs = cluster.Taectl({"logs", "r" + std::to_string(runs[0].at("id").get<int>())});
  CHECK(logs.exit_code == 0);
  CHECK(logs.out.find("step 60/60") != std::string::npos);

  // Resubmitting the identical spec returns the same experiment and queues nothing new.
  nlohmann::json again = cluster.TaectlJson({"submit", spec});
  CHECK(again.at("experiment") == exp_id);
  CHECK(again.at("existing") == true);
  CHECK(cluster.TaectlJson({"ls"}).size() == 1);
}

TEST_CASE("cancel stops a running run and its whole process group") {
  Cluster cluster(1, 1);
  std::string spec = cluster.dir().Write("long.toml", kTinyStudy);
  nlohmann::json submitted = cluster.TaectlJson(
      {"submit", spec, "--set", "train.steps=1000000", "--set", "train.seeds=[0]"});
  std::string exp = std::to_string(submitted.at("experiment").get<int64_t>());

  int64_t run_id = 0;
  int64_t pid = 0;
  REQUIRE(WaitUntil(
      [&] {
        for (const auto& run : cluster.TaectlJson({"runs", exp})) {
          if (run.at("state") == "running" && run.at("last_step").get<int64_t>() > 0) {
            run_id = run.at("id").get<int64_t>();
            pid = run.at("pid").get<int64_t>();
            return true;
          }
        }
        return false;
      },
      120));
  REQUIRE(pid > 0);
  REQUIRE(ProcessGroupExists(pid));

  CommandResult cancel = cluster.Taectl({"cancel", "r" + std::to_string(run_id)});
  REQUIRE(cancel.exit_code == 0);
  REQUIRE(WaitUntil(
      [&] {
        return cluster.TaectlJson({"show", "r" + std::to_string(run_id)}).at("state") ==
               "cancelled";
      },
      60));
  // The agent reports `cancelled` only after it has seen the group empty.
  CHECK_FALSE(ProcessGroupExists(pid));
  nlohmann::json shown = cluster.TaectlJson({"show", "r" + std::to_string(run_id)});
  CHECK(shown.at("transitions").back().at("from") == "running");
  CHECK(shown.at("transitions").back().at("to") == "cancelled");
  CHECK(shown.at("reason") == "cancelled by user");
}

TEST_CASE("a bad spec is refused with file:line:col and nothing is stored") {
  Cluster cluster(1, 1);
  std::string spec = cluster.dir().Write("bad.toml", "name = \"x\"\n[model]\nlayres = 2\n");
  CommandResult submit = cluster.Taectl({"submit", spec});
  CHECK(submit.exit_code == 2);
  CHECK(submit.err.find(spec + ":3:1: unknown key 'model.layres' (did you mean "
                               "'model.layers'?)") != std::string::npos);
  CHECK(cluster.TaectlJson({"ls"}).empty());
  CommandResult bad_set = cluster.Taectl(
      {"submit", cluster.dir().Write("ok.toml", kTinyStudy), "--set", "model.heads=3"});
  CHECK(bad_set.exit_code == 2);
  CHECK(bad_set.err.find("model.heads: 3 does not divide model.d_model 16") != std::string::npos);
  CHECK(cluster.TaectlJson({"ls"}).empty());
}

TEST_CASE("a run that fails is marked failed with the reason, and --wait exits non-zero") {
  Cluster cluster(1, 1);
  std::string spec = cluster.dir().Write("tiny.toml", kTinyStudy);
  CommandResult submit =
      cluster.Taectl({"submit", spec, "--set", "train.task=lm", "--set",
                      "train.data=/nonexistent/corpus.txt", "--set", "train.seeds=[0]", "--wait"});
  CHECK(submit.exit_code == 1);
  CHECK(submit.err.find("2 failed") != std::string::npos);
  nlohmann::json runs = cluster.TaectlJson({"runs", "tiny"});
  REQUIRE(runs.size() == 2);
  for (const auto& run : runs) {
    CHECK(run.at("state") == "failed");
    CHECK(run.at("exit_code") != 0);
    CHECK(run.at("reason").get<std::string>().find("/nonexistent/corpus.txt") != std::string::npos);
  }
}

TEST_CASE("a study with train.engine = \"torch\" runs end to end on a local agent") {
  if (RunCommand({"/usr/bin/python3", "-c", "import torch"}, 60).exit_code != 0) {
    TAE_SKIP("/usr/bin/python3 cannot import torch (apt-get install python3-torch)");
  }
  setenv("TAE_PYTHON", "/usr/bin/python3", 1);  // inherited by taed, the agent and tae-train
  Cluster cluster(1, 2);
  unsetenv("TAE_PYTHON");
  std::string spec = cluster.dir().Write("tiny.toml", kTinyStudy);
  CommandResult submit = cluster.Taectl({"submit", spec, "--set", "train.engine=torch", "--set",
                                         "train.head_importance=true", "--wait", "--json"},
                                        300);
  INFO("submit stderr: " << submit.err);
  REQUIRE(submit.exit_code == 0);
  const int64_t exp_id = nlohmann::json::parse(submit.out).at("experiment").get<int64_t>();
  nlohmann::json runs = cluster.TaectlJson({"runs", std::to_string(exp_id)});
  REQUIRE(runs.size() == 4);
  auto db = store::Db::Open(cluster.db_path());
  REQUIRE(db.ok());
  for (const auto& run : runs) {
    INFO(run.dump());
    CHECK(run.at("state") == "succeeded");
    CHECK(run.at("last_step") == 60);
    CHECK(run.at("meta").value("engine", "") == "torch");
    CHECK(run.at("meta").value("device", "") == "cpu");
    const int64_t run_id = run.at("id").get<int64_t>();
    CHECK(Steps(*db, run_id, "eval/loss") == std::vector<int64_t>{20, 40, 60});
    CHECK(Steps(*db, run_id, "model/params").size() == 1);
    CHECK(Steps(*db, run_id, "train/loss").back() == 60);
    if (run.at("variant") == "baseline") {  // 1 layer, 2 heads: two scores of each kind
      CHECK(Steps(*db, run_id, "heads/L0H1") == std::vector<int64_t>{60});
      CHECK(Steps(*db, run_id, "heads_grad/L0H0") == std::vector<int64_t>{60});
    }
  }
  CommandResult report = cluster.Taectl({"report", "tiny"});
  CHECK(report.exit_code == 0);
  CHECK(report.out.find("no-attn") != std::string::npos);
}

TEST_CASE("train.engine = \"torch\" without PyTorch fails at once, saying what to install") {
  TempDir bin;
  // A real interpreter that cannot import torch: Debian's python3 without its site packages.
  const std::string python =
      bin.Write("python-without-torch", "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n");
  chmod(python.c_str(), 0755);
  setenv("TAE_PYTHON", python.c_str(), 1);
  Cluster cluster(1, 1);
  unsetenv("TAE_PYTHON");
  std::string spec = cluster.dir().Write("tiny.toml", kTinyStudy);
  CommandResult submit = cluster.Taectl(
      {"submit", spec, "--set", "train.engine=torch", "--set", "train.seeds=[0]", "--wait"});
  CHECK(submit.exit_code == 1);
  nlohmann::json runs = cluster.TaectlJson({"runs", "tiny"});
  REQUIRE(runs.size() == 2);
  for (const auto& run : runs) {
    INFO(run.dump());
    CHECK(run.at("state") == "failed");
    CHECK(run.at("exit_code") == 2);
    CHECK(run.at("attempt") == 1);
    CHECK(run.at("reason").get<std::string>().find("python3-torch") != std::string::npos);
  }
}

TEST_CASE("a killed agent is restarted and adopts its run, which finishes in its first attempt") {
  Cluster cluster(1, 1);
  std::string spec = cluster.dir().Write("one.toml", R"(name = "one"
[model]
layers = 1
d_model = 16
heads = 2
[train]
steps = 3000
eval_every = 1000
seeds = [0]
)");
  nlohmann::json submitted = cluster.TaectlJson({"submit", spec});
  std::string exp = std::to_string(submitted.at("experiment").get<int64_t>());
  REQUIRE(WaitUntil(
      [&] {
        nlohmann::json runs = cluster.TaectlJson({"runs", exp});
        return runs[0].at("state") == "running" && runs[0].at("last_step").get<int64_t>() > 0;
      },
      120));
  long agent_pid = FindProcess("tae-agent", cluster.home());
  REQUIRE(agent_pid > 0);
  REQUIRE(kill(static_cast<pid_t>(agent_pid), SIGKILL) == 0);

  CommandResult wait = cluster.Taectl({"wait", exp}, 600);
  INFO(wait.err);
  REQUIRE(wait.exit_code == 0);
  for (const auto& run : cluster.TaectlJson({"runs", exp})) {
    CHECK(run.at("state") == "succeeded");
    CHECK(run.at("attempt") == 1);  // the job never stopped: its supervisor kept it
    nlohmann::json shown =
        cluster.TaectlJson({"show", "r" + std::to_string(run.at("id").get<int>())});
    std::vector<std::string> to;
    for (const auto& t : shown.at("transitions")) {
      to.push_back(t.at("to").get<std::string>());
    }
    CHECK(to == std::vector<std::string>{"queued", "assigned", "running", "succeeded"});
  }
  auto db = store::Db::Open(cluster.db_path());
  REQUIRE(db.ok());
  CHECK(*db->QueryInt("SELECT COUNT(*) FROM metrics m JOIN metric_keys k ON k.id = m.key_id "
                      "WHERE k.name = 'eval/loss'") == 3);
  CHECK(*db->QueryInt("SELECT COUNT(*) FROM metrics m JOIN metric_keys k ON k.id = m.key_id "
                      "WHERE k.name = 'train/loss'") > 0);
  nlohmann::json agents = cluster.TaectlJson({"agents"});
  REQUIRE(agents.size() == 1);
  CHECK(agents[0].at("state") == "ready");
}

TEST_CASE("a run whose processes die with its agent is requeued and completes") {
  Cluster cluster(1, 1);
  std::string spec = cluster.dir().Write("one.toml", R"(name = "one"
[model]
layers = 1
d_model = 16
heads = 2
[train]
steps = 3000
eval_every = 1000
seeds = [0]
)");
  nlohmann::json submitted = cluster.TaectlJson({"submit", spec});
  std::string exp = std::to_string(submitted.at("experiment").get<int64_t>());
  REQUIRE(WaitUntil(
      [&] {
        nlohmann::json runs = cluster.TaectlJson({"runs", exp});
        return runs[0].at("state") == "running" && runs[0].at("last_step").get<int64_t>() > 0;
      },
      120));
  // As when the machine goes away: the agent, the run's supervisor and the run itself.
  long agent_pid = FindProcess("tae-agent", cluster.home());
  long supervisor_pid = FindProcess("tae-job", cluster.home());
  std::ifstream pgid_file(cluster.home() + "/agents/local-0/runs/r1-a1.job/pgid");
  long job_group = 0;
  pgid_file >> job_group;
  REQUIRE(agent_pid > 0);
  REQUIRE(supervisor_pid > 0);
  REQUIRE(job_group > 0);
  REQUIRE(kill(static_cast<pid_t>(supervisor_pid), SIGKILL) == 0);
  REQUIRE(kill(-static_cast<pid_t>(job_group), SIGKILL) == 0);
  REQUIRE(kill(static_cast<pid_t>(agent_pid), SIGKILL) == 0);

  CommandResult wait = cluster.Taectl({"wait", exp}, 600);
  INFO(wait.err);
  REQUIRE(wait.exit_code == 0);
  for (const auto& run : cluster.TaectlJson({"runs", exp})) {
    CHECK(run.at("state") == "succeeded");
    CHECK(run.at("attempt") == 2);
    nlohmann::json shown =
        cluster.TaectlJson({"show", "r" + std::to_string(run.at("id").get<int>())});
    std::vector<std::string> to;
    for (const auto& t : shown.at("transitions")) {
      to.push_back(t.at("to").get<std::string>());
    }
    CHECK(to == std::vector<std::string>{"queued", "assigned", "running", "lost", "queued",
                                         "assigned", "running", "succeeded"});
  }
  // The second attempt's points replaced the first's: one point per step.
  auto db = store::Db::Open(cluster.db_path());
  REQUIRE(db.ok());
  CHECK(*db->QueryInt("SELECT COUNT(*) FROM metrics m JOIN metric_keys k ON k.id = m.key_id "
                      "WHERE k.name = 'eval/loss'") == 3);
  CHECK(*db->QueryInt("SELECT MIN(attempt) FROM metrics") == 2);
  nlohmann::json agents = cluster.TaectlJson({"agents"});
  REQUIRE(agents.size() == 1);
  CHECK(agents[0].at("state") == "ready");
}

// On failure the messages carry down/up/wait output and the end of taed.log.
TEST_CASE("taectl down interrupts running runs, they are requeued and finish after up") {
  Cluster cluster(1, 1);
  std::string spec = cluster.dir().Write("tiny.toml", kTinyStudy);
  nlohmann::json submitted =
      cluster.TaectlJson({"submit", spec, "--set", "train.steps=4000", "--set",
                          "train.eval_every=1000", "--set", "train.seeds=[0]"});
  std::string exp = std::to_string(submitted.at("experiment").get<int64_t>());
  REQUIRE(WaitUntil(
      [&] {
        for (const auto& run : cluster.TaectlJson({"runs", exp})) {
          if (run.at("state") == "running" && run.at("last_step").get<int64_t>() > 0) {
            return true;
          }
        }
        return false;
      },
      120));
  CommandResult down = cluster.Taectl({"down"});
  INFO("down: " << down.out << down.err);
  REQUIRE(down.exit_code == 0);
  CommandResult up = cluster.Taectl({"up", "--agents", "1", "--slots", "2"});
  INFO("up: " << up.out << up.err);
  REQUIRE(up.exit_code == 0);
  CommandResult wait = cluster.Taectl({"wait", exp}, 600);
  INFO("wait: " << wait.out << wait.err);
  std::ifstream log(cluster.home() + "/logs/taed.log");
  std::string log_text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  INFO("taed.log: " << log_text.substr(log_text.size() > 6000 ? log_text.size() - 6000 : 0));
  REQUIRE(wait.exit_code == 0);
  int requeued = 0;
  for (const auto& run : cluster.TaectlJson({"runs", exp})) {
    CHECK(run.at("state") == "succeeded");
    nlohmann::json shown =
        cluster.TaectlJson({"show", "r" + std::to_string(run.at("id").get<int>())});
    for (const auto& t : shown.at("transitions")) {
      if (t.at("to") == "lost") {
        ++requeued;
        CHECK(t.at("reason") == "agent shut down");
      }
    }
  }
  CHECK(requeued == 1);  // one slot: exactly one run was running at `down`
}

TEST_CASE("logs -f follows a run from before its first line to its end") {
  Cluster cluster(1, 1);
  std::string spec = cluster.dir().Write("tiny.toml", kTinyStudy);
  nlohmann::json submitted =
      cluster.TaectlJson({"submit", spec, "--set", "train.steps=1500", "--set", "train.seeds=[0]"});
  nlohmann::json runs =
      cluster.TaectlJson({"runs", std::to_string(submitted.at("experiment").get<int64_t>())});
  std::string run = "r" + std::to_string(runs[0].at("id").get<int64_t>());
  CommandResult follow = cluster.Taectl({"logs", run, "-f"}, 300);
  CHECK(follow.exit_code == 0);
  CHECK(follow.out.find("step 1500/1500") != std::string::npos);
  // It returned because the run ended, not because output paused.
  CHECK(cluster.TaectlJson({"show", run}).at("state") == "succeeded");
  // Every line exactly once.
  size_t first = follow.out.find("step 1500/1500");
  CHECK(follow.out.find("step 1500/1500", first + 1) == std::string::npos);
}

TEST_CASE("taed refuses a second instance on the same data dir and keeps its files private") {
  Cluster cluster(0, 1);
  CommandResult second = RunCommand({BinPath("taed"), "--home", cluster.home(), "--agents", "0"});
  CHECK(second.exit_code == 1);
  CHECK(second.err.find("another taed (pid") != std::string::npos);
  struct stat st {};
  REQUIRE(stat((cluster.home() + "/taed.sock").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(stat(cluster.home().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  CommandResult agents = cluster.Taectl({"agents", "--json"});
  CHECK(agents.exit_code == 0);
}

}  // namespace tae::testing
