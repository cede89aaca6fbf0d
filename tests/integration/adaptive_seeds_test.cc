// Adaptive seeds end to end: taed adds seeds only to the comparisons still undecided, up to max,
// and a kill -9 of taed mid-study adds no seed twice.

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

// score = 1000 * lr + a fixed noise per seed: "far" (lr 0.011) is 10 above the baseline at every
// seed, "close" (lr 0.00113) 0.13 above it: against the noise (sd ~0.08) an effect that 5 seeds
// do not decide at the family's alpha (0.05 split between the two comparisons; p 0.24, 0.11 and
// 0.053 at 3, 4 and 5 seeds) and that futility does not give up on before max (an identical
// variant would be stopped at 3 seeds as futile).
constexpr char kScore[] = R"(#!/bin/sh
noise=$(echo "0.05 -0.08 0.11 -0.02 0.07 -0.12 0.03 -0.06 0.09 -0.04" | cut -d' ' -f$(( $2 % 10 + 1 )))
sleep 0.3
awk "BEGIN { print \"score=\" (1000 * $1 + $noise) }"
)";

constexpr char kStudy[] = R"(name = "adaptive"
[train]
lr = 0.001
seeds = { min = 3, max = 5 }
[[ablation]]
name = "far"
"train.lr" = 0.011
[[ablation]]
name = "close"
"train.lr" = 0.00113
[report]
metrics = ["score"]
[job]
code = "src"
command = "sh score.sh {train.lr} {train.seed}"
)";

std::map<std::string, std::set<int64_t>> SeedsByVariant(const nlohmann::json& runs) {
  std::map<std::string, std::set<int64_t>> seeds;
  for (const auto& run : runs) {
    const bool fresh = seeds[run.at("variant")].insert(run.at("seed").get<int64_t>()).second;
    CHECK(fresh);  // one run per variant and seed
  }
  return seeds;
}

}  // namespace

TEST_CASE("adaptive seeds grow only undecided comparisons, to max, and survive a kill -9 of taed") {
  setenv("TAE_AGENT_GRACE", "20", 1);
  Cluster cluster(1, 4);
  std::filesystem::create_directories(cluster.home() + "/study/src");
  std::ofstream(cluster.home() + "/study/src/score.sh") << kScore;
  const std::string spec = cluster.dir().Write("study/adaptive.toml", kStudy);
  nlohmann::json submitted = cluster.TaectlJson({"submit", spec});
  const std::string exp = std::to_string(submitted.at("experiment").get<int64_t>());
  CHECK(cluster.TaectlJson({"runs", exp}).size() == 9);

  // Once the first seeds were added, taed is killed and started again.
  REQUIRE(WaitUntil([&] { return cluster.TaectlJson({"runs", exp}).size() >= 11; }, 120));
  REQUIRE(cluster.KillTaed());
  CommandResult up = cluster.Taectl({"up", "--agents", "1", "--slots", "4"}, 120);
  INFO(up.err);
  REQUIRE(up.exit_code == 0);

  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "300"}, 330);
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);
  const nlohmann::json runs = cluster.TaectlJson({"runs", exp});
  const std::map<std::string, std::set<int64_t>> seeds = SeedsByVariant(runs);
  CHECK(seeds.at("far") == std::set<int64_t>{0, 1, 2});             // decided at 3
  CHECK(seeds.at("close") == std::set<int64_t>{0, 1, 2, 3, 4});     // undecided to max
  CHECK(seeds.at("baseline") == std::set<int64_t>{0, 1, 2, 3, 4});  // shared, grown once
  CHECK(runs.size() == 13);
  int added = 0;
  for (const auto& run : runs) {
    CHECK(run.at("state") == "succeeded");
    if (run.at("seed").get<int64_t>() >= 3) {
      nlohmann::json shown =
          cluster.TaectlJson({"show", "r" + std::to_string(run.at("id").get<int64_t>())});
      const std::string reason = shown.at("transitions")[0].at("reason");
      CHECK(reason.rfind("added by adaptive seeds: score: close vs baseline undecided at n=", 0) ==
            0);
      ++added;
    }
  }
  CHECK(added == 4);

  const nlohmann::json report = cluster.TaectlJson({"report", exp});
  CHECK(report.at("adaptive") == true);
  std::map<std::string, nlohmann::json> cells;
  for (const auto& row : report.at("rows")) {
    cells[row.at("variant")] = row.at("metrics").at("score");
  }
  CHECK(cells.at("far").at("decision") == "different");
  CHECK(cells.at("far").at("decision_n") == 3);
  CHECK(cells.at("close").at("decision") == "undecided");
  CHECK(cells.at("close").at("decision_n") == 5);
  CHECK(cells.at("close").at("decision_final") == true);
}

}  // namespace tae::testing
