// The tuned table's choice (server/report/tuned.h): each variant at its own best grid point.
#include "server/report/tuned.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

namespace tae::report {
namespace {

using model::FinalValue;
using model::RunState;

FinalValue Value(const std::string& variant, int64_t seed, double value,
                 const std::string& key = "eval/loss", RunState state = RunState::kSucceeded) {
  FinalValue v;
  v.variant = variant;
  v.seed = seed;
  v.state = state;
  v.key = key;
  v.value = value;
  v.min_value = value;
  v.max_value = value;
  return v;
}

const std::vector<std::string> kVariants = {"baseline[lr=0.1]",   "no-pos[lr=0.1]",
                                            "baseline[lr=0.01]",  "no-pos[lr=0.01]",
                                            "baseline[lr=0.001]", "no-pos[lr=0.001]"};

TEST_CASE("each variant gets its own best grid point on the mean over seeds", "[report][tuned]") {
  const std::vector<FinalValue> values = {
      Value("baseline[lr=0.1]", 0, 2.0), Value("baseline[lr=0.1]", 1, 2.2),
      Value("baseline[lr=0.01]", 0, 1.0), Value("baseline[lr=0.01]", 1, 1.4),    // mean 1.2
      Value("baseline[lr=0.001]", 0, 0.9), Value("baseline[lr=0.001]", 1, 1.7),  // mean 1.3
      Value("no-pos[lr=0.1]", 0, 3.0), Value("no-pos[lr=0.01]", 0, 2.5),
      Value("no-pos[lr=0.001]", 0, 2.9),
      // Other metrics, and runs that did not succeed, do not count.
      Value("no-pos[lr=0.1]", 1, 0.1, "eval/acc"),
      Value("no-pos[lr=0.001]", 1, 0.0, "eval/loss", RunState::kFailed)};
  const std::vector<TunedChoice> choices = ChooseTuned(kVariants, values, "eval/loss", false);
  REQUIRE(choices.size() == 2);
  CHECK(choices[0].ablation == "baseline");
  CHECK(choices[0].variant == "baseline[lr=0.01]");
  CHECK(choices[0].point == "lr=0.01");
  CHECK(choices[0].score == Approx(1.2));
  CHECK(choices[0].n == 2);
  CHECK(choices[0].candidates == 3);
  CHECK(choices[0].points == 3);
  CHECK(choices[1].ablation == "no-pos");
  CHECK(choices[1].variant == "no-pos[lr=0.01]");
  CHECK(choices[1].n == 1);
  // Larger is better: the other end.
  const std::vector<TunedChoice> max = ChooseTuned(kVariants, values, "eval/loss", true);
  CHECK(max[0].variant == "baseline[lr=0.1]");
  CHECK(max[1].variant == "no-pos[lr=0.1]");
}

TEST_CASE("ties go to the first point in spec order, and pruned or diverged points do not win",
          "[report][tuned]") {
  const std::vector<FinalValue> values = {
      Value("baseline[lr=0.1]", 0, std::nan("")), Value("baseline[lr=0.01]", 0, 1.0),
      Value("baseline[lr=0.001]", 0, 1.0),
      // Every seed of no-pos[lr=0.01] was pruned (its last value was the best so far).
      Value("no-pos[lr=0.01]", 0, 0.1, "eval/loss", RunState::kCancelled),
      Value("no-pos[lr=0.001]", 0, 2.0)};
  const std::vector<TunedChoice> choices = ChooseTuned(kVariants, values, "eval/loss", false);
  REQUIRE(choices.size() == 2);
  CHECK(choices[0].variant == "baseline[lr=0.01]");
  CHECK(choices[1].variant == "no-pos[lr=0.001]");
  CHECK(choices[1].candidates == 1);
}

TEST_CASE("the chosen baseline comes first, and a variant without values has no point",
          "[report][tuned]") {
  const std::vector<FinalValue> values = {Value("no-pos[lr=0.1]", 0, 1.0),
                                          Value("baseline[lr=0.1]", 0, 1.0)};
  std::vector<TunedChoice> choices = ChooseTuned(
      {"no-pos[lr=0.1]", "baseline[lr=0.1]", "other[lr=0.1]"}, values, "eval/loss", false);
  REQUIRE(choices.size() == 3);
  CHECK(choices[0].ablation == "baseline");
  CHECK(choices[1].ablation == "no-pos");
  CHECK(choices[2].ablation == "other");
  CHECK(choices[2].variant.empty());
  CHECK(choices[2].candidates == 0);
  choices =
      ChooseTuned({"no-pos[lr=0.1]", "baseline[lr=0.1]"}, values, "eval/loss", false, "no-pos");
  CHECK(choices[0].ablation == "no-pos");
  // Without a grid a variant is its own only point.
  choices = ChooseTuned({"baseline", "no-pos"}, {Value("baseline", 0, 1.0)}, "eval/loss", false);
  CHECK(choices[0].variant == "baseline");
  CHECK(choices[0].point.empty());
}

TEST_CASE("an ablation whose every point was pruned counts its runs at all its points",
          "[report][tuned]") {
  std::vector<model::RunRecord> runs;
  int64_t id = 0;
  auto add = [&](const std::string& variant, int64_t seed, RunState state) {
    model::RunRecord run;
    run.id = ++id;
    run.variant = variant;
    run.seed = seed;
    run.state = state;
    runs.push_back(run);
  };
  for (const std::string& variant : kVariants) {
    const bool baseline = variant.rfind("baseline", 0) == 0;
    add(variant, 0, baseline ? RunState::kSucceeded : RunState::kPruned);
    add(variant, 1, baseline ? RunState::kSucceeded : RunState::kFailed);
  }
  const std::vector<FinalValue> values = {
      Value("baseline[lr=0.1]", 0, 2.0),
      Value("baseline[lr=0.1]", 1, 2.0),
      Value("baseline[lr=0.01]", 0, 1.0),
      Value("baseline[lr=0.01]", 1, 1.0),
      Value("baseline[lr=0.001]", 0, 3.0),
      Value("baseline[lr=0.001]", 1, 3.0),
      Value("no-pos[lr=0.1]", 0, 0.5, "eval/loss", RunState::kPruned)};
  const std::vector<Row> rows =
      BuildTunedReport(kVariants, runs, values, {"eval/loss"}, "eval/loss", false, "baseline");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].variant == "baseline[lr=0.01]");
  CHECK(rows[0].runs == 2);
  CHECK(rows[0].runs_total == 2);
  CHECK(rows[1].ablation == "no-pos");
  CHECK(rows[1].point.empty());
  CHECK(rows[1].candidates == 0);
  CHECK(rows[1].points == 3);
  CHECK(rows[1].runs == 0);
  CHECK(rows[1].runs_total == 6);
  CHECK(rows[1].runs_pruned == 3);
}

}  // namespace
}  // namespace tae::report
