// report::PlanScaleStop: when scale.stop_if is due, which ablations skip their larger rungs.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/report/scale.h"

namespace tae::report {
namespace {

// Rungs of 1e6..6.4e7 (scale.params); stop after the first 3 with band 0.1.
model::ScaleSettings Settings() {
  model::ScaleSettings s;
  s.rungs = {"params.n=1e6", "params.n=4e6", "params.n=1.6e7", "params.n=6.4e7"};
  s.params = {1e6, 4e6, 1.6e7, 6.4e7};
  s.stop_rungs = 3;
  s.stop_band = 0.1;
  return s;
}

struct Ladder {
  std::vector<model::RunRecord> runs;
  std::vector<model::FinalValue> values;
};

// Each named ablation with multiplier m, 4 seeds at every rung, 0.3% deterministic noise; the
// runs of rungs >= `ended_below` are queued (held), the others succeeded.
Ladder Make(const std::vector<std::pair<std::string, double>>& ablations, int ended_below) {
  Ladder ladder;
  const double noise[4] = {0.003, -0.002, 0.001, -0.0025};
  const std::vector<double> sizes = Settings().params;
  int64_t id = 0;
  for (const auto& [name, m] : ablations) {
    for (int r = 0; r < 4; ++r) {
      for (int seed = 0; seed < 4; ++seed) {
        model::RunRecord& run = ladder.runs.emplace_back();
        run.id = ++id;
        run.variant = absl::StrCat(name, "[rung=", r, "]");
        run.seed = seed;
        run.state = r < ended_below ? model::RunState::kSucceeded : model::RunState::kQueued;
        if (r >= ended_below) {
          continue;
        }
        model::FinalValue& v = ladder.values.emplace_back();
        v.run_id = run.id;
        v.variant = run.variant;
        v.seed = seed;
        v.state = run.state;
        v.key = "loss";
        v.value = (2 + 100 * std::pow(m * sizes[r], -0.3)) * (1 + noise[seed]);
      }
    }
  }
  return ladder;
}

TEST_CASE("PlanScaleStop skips an ablation whose multiplier lies within the band", "[scale]") {
  const Ladder ladder = Make({{"baseline", 1}, {"same", 1}, {"better", 1.5}}, 3);
  const ScaleStopPlan plan = PlanScaleStop(Settings(), ladder.runs, ladder.values, "loss");
  CHECK(plan.due);
  REQUIRE(plan.skip.count("same") == 1);
  CHECK(absl::StartsWith(plan.skip.at("same"), kScaleSkipped));
  CHECK(absl::StrContains(plan.skip.at("same"), "within 1 ± 0.1 after rungs 0-2"));
  CHECK(plan.skip.count("better") == 0);
  CHECK(plan.go_on == std::vector<std::string>{"better"});
  CHECK(plan.skip.count("baseline") == 0);  // the baseline never skips
}

TEST_CASE("PlanScaleStop is not due while a run of the first rungs has not ended", "[scale]") {
  Ladder ladder = Make({{"baseline", 1}, {"same", 1}}, 3);
  for (model::RunRecord& run : ladder.runs) {
    if (run.variant == "same[rung=2]" && run.seed == 3) {
      run.state = model::RunState::kRunning;
    }
  }
  const ScaleStopPlan plan = PlanScaleStop(Settings(), ladder.runs, ladder.values, "loss");
  CHECK_FALSE(plan.due);
  CHECK(plan.skip.empty());
  CHECK(plan.go_on.empty());
}

TEST_CASE("PlanScaleStop goes on when it cannot decide", "[scale]") {
  SECTION("the band is narrower than the interval") {
    model::ScaleSettings settings = Settings();
    settings.stop_band = 1e-6;
    const Ladder ladder = Make({{"baseline", 1}, {"same", 1}}, 3);
    const ScaleStopPlan plan = PlanScaleStop(settings, ladder.runs, ladder.values, "loss");
    CHECK(plan.due);
    CHECK(plan.skip.empty());
    CHECK(plan.go_on == std::vector<std::string>{"same"});
  }
  SECTION("no size is known (no scale.params, no params metric)") {
    model::ScaleSettings settings = Settings();
    settings.params.clear();
    const Ladder ladder = Make({{"baseline", 1}, {"same", 1}}, 3);
    const ScaleStopPlan plan = PlanScaleStop(settings, ladder.runs, ladder.values, "loss");
    CHECK(plan.due);
    CHECK(plan.skip.empty());
    CHECK(plan.go_on == std::vector<std::string>{"same"});
  }
  SECTION("another metric than the runs report") {
    const Ladder ladder = Make({{"baseline", 1}, {"same", 1}}, 3);
    const ScaleStopPlan plan = PlanScaleStop(Settings(), ladder.runs, ladder.values, "eval/loss");
    CHECK(plan.skip.empty());
    CHECK(plan.go_on == std::vector<std::string>{"same"});
  }
  SECTION("no stop_if, or one that covers the whole ladder") {
    const Ladder ladder = Make({{"baseline", 1}, {"same", 1}}, 4);
    model::ScaleSettings settings = Settings();
    settings.stop_rungs = 0;
    CHECK_FALSE(PlanScaleStop(settings, ladder.runs, ladder.values, "loss").due);
    settings.stop_rungs = 4;
    CHECK_FALSE(PlanScaleStop(settings, ladder.runs, ladder.values, "loss").due);
  }
}

}  // namespace
}  // namespace tae::report
