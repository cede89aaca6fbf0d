// Steering the scheduler through the real binaries: drain an agent, pause and resume an
// experiment, read why runs wait, and retry only the runs that did not succeed.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

constexpr const char* kStudy = R"(name = "steer"
[model]
layers = 1
d_model = 16
heads = 2
[train]
steps = 30
eval_every = 10
warmup = 5
seeds = [0, 1]
)";

std::vector<std::string> Reasons(Cluster& cluster) {
  std::vector<std::string> reasons;
  for (const auto& run : cluster.TaectlJson({"queue"})) {
    reasons.push_back(run.at("reason").get<std::string>());
  }
  return reasons;
}

TEST_CASE("drain, pause and resume decide what starts, and the queue says why runs wait") {
  Cluster cluster(1, 2);
  nlohmann::json agents = cluster.TaectlJson({"agents"});
  REQUIRE(agents.size() == 1);
  const std::string agent = agents[0].at("id");
  REQUIRE(cluster.Taectl({"agents", "drain", agent}).exit_code == 0);
  CHECK(cluster.TaectlJson({"agents"})[0].at("state") == "draining");

  std::string spec = cluster.dir().Write("steer.toml", kStudy);
  const std::string exp =
      std::to_string(cluster.TaectlJson({"submit", spec}).at("experiment").get<int64_t>());
  // Scheduling happens inside each call, so these states are settled when the call returns.
  CHECK(Reasons(cluster) ==
        std::vector<std::string>(
            2,
            "waiting: every matching agent is draining or quarantined (taectl agents "
            "undrain ID)"));
  nlohmann::json paused = cluster.TaectlJson({"pause", exp});
  CHECK(paused.at("paused") == true);
  CHECK(Reasons(cluster) == std::vector<std::string>(2, "experiment paused (taectl resume)"));

  REQUIRE(cluster.Taectl({"agents", "undrain", agent}).exit_code == 0);
  // The agent is free again but the experiment is paused: nothing starts.
  for (const auto& run : cluster.TaectlJson({"runs", exp})) {
    CHECK(run.at("state") == "queued");
  }
  CHECK(Reasons(cluster).size() == 2);

  nlohmann::json resumed = cluster.TaectlJson({"resume", exp});
  CHECK(resumed.at("paused") == false);
  CommandResult wait = cluster.Taectl({"wait", exp}, 300);
  INFO(wait.err);
  REQUIRE(wait.exit_code == 0);
  CommandResult empty = cluster.Taectl({"queue"});
  CHECK(empty.out == "nothing queued\n");

  CommandResult unknown = cluster.Taectl({"agents", "drain", "no-such-agent"});
  CHECK(unknown.exit_code != 0);
  CHECK(unknown.err.find("no agent 'no-such-agent'") != std::string::npos);
}

TEST_CASE("retry --failed requeues only the runs that did not succeed, keeping their history") {
  Cluster cluster(1, 2);
  std::string spec = cluster.dir().Write("steer.toml", std::string(kStudy) + R"([[ablation]]
name = "bad-data"
"train.task" = "lm"
"train.data" = "/nonexistent/corpus.txt"
)");
  const std::string exp =
      std::to_string(cluster.TaectlJson({"submit", spec}).at("experiment").get<int64_t>());
  CommandResult wait = cluster.Taectl({"wait", exp}, 300);
  CHECK(wait.exit_code != 0);  // two runs failed

  CommandResult no_flag = cluster.Taectl({"retry", exp});
  CHECK(no_flag.exit_code == 2);
  CHECK(no_flag.err.find("pass --failed") != std::string::npos);

  nlohmann::json retried = cluster.TaectlJson({"retry", exp, "--failed"});
  CHECK(retried.at("requeued") == 2);
  wait = cluster.Taectl({"wait", exp}, 300);
  CHECK(wait.exit_code != 0);  // the data is still missing

  for (const auto& run : cluster.TaectlJson({"runs", exp})) {
    const std::string id = "r" + std::to_string(run.at("id").get<int64_t>());
    nlohmann::json shown = cluster.TaectlJson({"show", id});
    std::vector<std::string> to;
    for (const auto& t : shown.at("transitions")) {
      to.push_back(t.at("to"));
    }
    if (run.at("variant") == "baseline") {
      CHECK(run.at("state") == "succeeded");
      CHECK(run.at("attempt") == 1);  // never rerun
      CHECK(to == std::vector<std::string>{"queued", "assigned", "running", "succeeded"});
    } else {
      CHECK(run.at("state") == "failed");
      CHECK(run.at("attempt") == 2);
      CHECK(to == std::vector<std::string>{"queued", "assigned", "running", "failed", "queued",
                                           "assigned", "running", "failed"});
    }
  }
}

}  // namespace
}  // namespace tae::testing
