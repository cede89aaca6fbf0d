// A lab's queue through the real binaries: 2,000 queued runs of 51 studies (one of 1,500, fifty
// of 10) on local agents that stop taking work and start again while the queue drains. Every
// run is placed once and succeeds, and every placement kept the fair share: replaying the
// stored transitions, each run placed was of a study with no more active runs than any other
// study that had runs waiting.

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/store/db.h"
#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

// `variants` x `seeds` runs of a command job that sleeps a little (so runs overlap).
std::string Study(const std::string& name, int variants, int seeds) {
  std::vector<int> seed_list;
  for (int s = 0; s < seeds; ++s) {
    seed_list.push_back(s);
  }
  std::string text =
      absl::StrCat("name = \"", name, "\"\n[train]\nseeds = [", absl::StrJoin(seed_list, ", "),
                   "]\n[params]\nv = 0\n[job]\ncommand = \"sleep 0.2\"\n");
  for (int v = 1; v < variants; ++v) {
    absl::StrAppend(&text, "\n[[ablation]]\nname = \"v", v, "\"\n\"params.v\" = ", v, "\n");
  }
  return text;
}

struct Transition {
  int64_t run = 0;
  int64_t experiment = 0;
  std::string from;
  std::string to;
};

std::vector<Transition> Transitions(const std::string& db_path) {
  auto db = store::Db::Open(db_path);
  REQUIRE(db.ok());
  auto stmt = db->Prepare(
      "SELECT t.run_id, r.experiment_id, t.from_state, t.to_state FROM run_transitions t JOIN "
      "runs r ON r.id = t.run_id ORDER BY t.id");
  REQUIRE(stmt.ok());
  std::vector<Transition> out;
  while (*stmt->Step()) {
    out.push_back({stmt->Int(0), stmt->Int(1), stmt->Text(2), stmt->Text(3)});
  }
  return out;
}

}  // namespace

TEST_CASE("thousands of queued runs on agents that stop and start: each placed once, fairly") {
  Cluster cluster(4, 6);
  nlohmann::json agents = cluster.TaectlJson({"agents"});
  REQUIRE(agents.size() == 4);
  std::vector<std::string> ids;
  for (const auto& agent : agents) {
    ids.push_back(agent.at("id").get<std::string>());
    REQUIRE(cluster.Taectl({"agents", "drain", ids.back()}).exit_code == 0);
  }
  // The queue fills while no agent takes work: the large study first, then the small ones.
  REQUIRE(
      cluster.Taectl({"submit", cluster.dir().Write("big.toml", Study("big", 5, 300))}).exit_code ==
      0);
  constexpr int kSmall = 50;
  for (int e = 0; e < kSmall; ++e) {
    const std::string name = absl::StrCat("small-", e);
    REQUIRE(cluster.Taectl({"submit", cluster.dir().Write(name + ".toml", Study(name, 5, 2))})
                .exit_code == 0);
  }
  constexpr int kRuns = 1500 + kSmall * 10;
  CHECK(cluster.TaectlJson({"queue"}).size() == kRuns);

  auto succeeded = [&] {
    int done = 0;
    for (const auto& exp : cluster.TaectlJson({"ls", "--limit", "0"})) {
      done += exp.at("counts").at("succeeded").get<int>();
    }
    return done;
  };
  // Agents start taking work one at a time; later two stop (drain: their runs finish) and
  // start again while the queue drains.
  for (const std::string& id : ids) {
    REQUIRE(cluster.Taectl({"agents", "undrain", id}).exit_code == 0);
  }
  REQUIRE(WaitUntil([&] { return succeeded() >= kRuns / 4; }, 600));
  REQUIRE(cluster.Taectl({"agents", "drain", ids[1]}).exit_code == 0);
  REQUIRE(cluster.Taectl({"agents", "drain", ids[2]}).exit_code == 0);
  REQUIRE(WaitUntil([&] { return succeeded() >= kRuns / 2; }, 600));
  REQUIRE(cluster.Taectl({"agents", "undrain", ids[1]}).exit_code == 0);
  REQUIRE(cluster.Taectl({"agents", "undrain", ids[2]}).exit_code == 0);
  REQUIRE(WaitUntil([&] { return succeeded() == kRuns; }, 900));

  // Replay: per study its queued runs and active runs, as the scheduler saw them.
  std::map<int64_t, int> queued;
  std::map<int64_t, int> active;
  std::map<int64_t, int> placements;  // per run
  int unfair = 0;
  std::string first_unfair;
  for (const Transition& t : Transitions(cluster.db_path())) {
    if (t.to == "queued") {
      queued[t.experiment] += 1;
    }
    if (t.from == "queued") {
      queued[t.experiment] -= 1;
    }
    if (t.to == "assigned") {
      placements[t.run] += 1;
      int fewest = active[t.experiment];
      for (const auto& [experiment, waiting] : queued) {
        if (waiting > 0 || experiment == t.experiment) {
          fewest = std::min(fewest, active[experiment]);
        }
      }
      if (active[t.experiment] > fewest && unfair++ == 0) {
        first_unfair =
            absl::StrCat("r", t.run, " of e", t.experiment, " with ", active[t.experiment],
                         " active while a study with ", fewest, " waited");
      }
      active[t.experiment] += 1;
    }
    const bool was_active = t.from == "assigned" || t.from == "running";
    const bool is_active = t.to == "assigned" || t.to == "running";
    if (was_active && !is_active) {
      active[t.experiment] -= 1;
    }
  }
  INFO(first_unfair);
  CHECK(unfair == 0);
  CHECK(placements.size() == static_cast<size_t>(kRuns));
  int twice = 0;
  for (const auto& [run, count] : placements) {
    twice += count != 1 ? 1 : 0;
  }
  CHECK(twice == 0);  // drained agents finish their runs: nothing was placed again
  for (const auto& [experiment, waiting] : queued) {
    CHECK(waiting == 0);
  }
  for (const auto& [experiment, running] : active) {
    CHECK(running == 0);
  }
}

}  // namespace tae::testing
