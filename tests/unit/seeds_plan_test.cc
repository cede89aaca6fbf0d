// server/seeds: which runs an adaptive experiment adds, as a pure function of its stored runs.

#include <catch2/catch.hpp>

#include "server/seeds/seeds.h"

namespace tae::seeds {
namespace {

model::ExperimentReport Adaptive(int min, int max) {
  model::ExperimentReport report;
  report.metrics = {"score"};
  report.min_seeds = min;
  report.max_seeds = max;
  return report;
}

struct Study {
  std::vector<model::RunRecord> runs;
  std::vector<model::FinalValue> values;
  // A run of `variant` at `seed` in `state`; succeeded ones report `value` unless NaN.
  int64_t Add(const std::string& variant, int64_t seed, model::RunState state, double value = 0,
              bool report = true) {
    model::RunRecord run;
    run.id = static_cast<int64_t>(runs.size()) + 1;
    run.variant = variant;
    run.seed = seed;
    run.state = state;
    runs.push_back(run);
    if (state == model::RunState::kSucceeded && report) {
      values.push_back({run.id, variant, seed, state, "score", value, value, value, std::nullopt});
    }
    return run.id;
  }
};

constexpr auto kDone = model::RunState::kSucceeded;

}  // namespace

TEST_CASE("the primary metric is [report]'s first, else eval/loss") {
  model::ExperimentReport report;
  CHECK(PrimaryMetric(report) == "eval/loss");
  report.metrics = {"eval/acc", "eval/loss"};
  CHECK(PrimaryMetric(report) == "eval/acc");
}

TEST_CASE("a list of seeds adds nothing") {
  Study s;
  s.Add("baseline", 0, kDone, 1.0);
  s.Add("no-pos", 0, kDone, 1.0);
  model::ExperimentReport fixed;
  fixed.metrics = {"score"};
  CHECK(PlanSeeds(fixed, s.runs, s.values).add.empty());
}

TEST_CASE("an undecided comparison adds one seed to each arm, above the highest seed") {
  Study s;
  for (int seed = 0; seed < 3; ++seed) {
    s.Add("baseline", seed, kDone, 1.0 + 0.1 * seed);
    s.Add("no-pos", seed, kDone, 1.05 + 0.1 * seed);
  }
  Plan plan = PlanSeeds(Adaptive(3, 6), s.runs, s.values);
  REQUIRE(plan.add.size() == 2);
  CHECK(plan.add[0].variant == "baseline");
  CHECK(plan.add[0].seeds == std::vector<int64_t>{3});
  CHECK(plan.add[0].like_run == 1);  // seed 0's run: its config is the template
  CHECK(plan.add[1].variant == "no-pos");
  CHECK(plan.add[1].seeds == std::vector<int64_t>{3});
  CHECK(plan.add[1].why.rfind("score: no-pos vs baseline undecided at n=3 (p=", 0) == 0);
  CHECK(plan.held.empty());
}

TEST_CASE("nothing is added while a run of the comparison is pending, nor once it is decided") {
  Study pending;
  for (int seed = 0; seed < 3; ++seed) {
    pending.Add("baseline", seed, kDone, 1.0 + 0.1 * seed);
    pending.Add("no-pos", seed, seed == 2 ? model::RunState::kRunning : kDone, 1.05 + 0.1 * seed);
  }
  CHECK(PlanSeeds(Adaptive(3, 6), pending.runs, pending.values).add.empty());

  Study decided;  // a large, clean effect: different at the first look
  for (int seed = 0; seed < 3; ++seed) {
    decided.Add("baseline", seed, kDone, 1.0 + 0.01 * seed);
    decided.Add("no-pos", seed, kDone, 9.0 + 0.01 * seed);
  }
  CHECK(PlanSeeds(Adaptive(3, 6), decided.runs, decided.values).add.empty());
}

TEST_CASE("the baseline grows once for all of its undecided comparisons, per grid point") {
  Study s;
  for (int seed = 0; seed < 3; ++seed) {
    s.Add("baseline[lr=1]", seed, kDone, 1.0 + 0.1 * seed);
    s.Add("a[lr=1]", seed, kDone, 1.05 + 0.1 * seed);  // undecided (p = 0.57), not futile
    s.Add("b[lr=1]", seed, kDone, 0.95 + 0.1 * seed);
    s.Add("baseline[lr=2]", seed, kDone, 1.0 + 0.01 * seed);
    s.Add("a[lr=2]", seed, kDone, 5.0 + 0.01 * seed);  // decided
  }
  Plan plan = PlanSeeds(Adaptive(3, 6), s.runs, s.values);
  REQUIRE(plan.add.size() == 3);
  CHECK(plan.add[0].variant == "baseline[lr=1]");
  CHECK(plan.add[0].seeds == std::vector<int64_t>{3});
  CHECK(plan.add[0].why.find("a[lr=1] vs baseline[lr=1]") != std::string::npos);
  CHECK(plan.add[0].why.find("b[lr=1] vs baseline[lr=1]") != std::string::npos);
  CHECK(plan.add[1].variant == "a[lr=1]");
  CHECK(plan.add[2].variant == "b[lr=1]");
}

TEST_CASE("a comparison that max seeds would not decide stops growing (futility)") {
  // A delta of 0.02 on a spread of 0.1: 3 more seeds per arm would make it different less than 5%
  // of the time (common/stats/sequential.h), so it ends undecided at n = 3.
  Study s;
  for (int seed = 0; seed < 3; ++seed) {
    s.Add("baseline", seed, kDone, 1.0 + 0.1 * seed);
    s.Add("no-pos", seed, kDone, 1.02 + 0.1 * seed);
  }
  const Plan plan = PlanSeeds(Adaptive(3, 6), s.runs, s.values);
  CHECK(plan.add.empty());
  CHECK(plan.held.empty());
}

TEST_CASE("a failed run's seed is replaced, never past max runs") {
  Study s;
  for (int seed = 0; seed < 3; ++seed) {
    s.Add("baseline", seed, kDone, 1.0 + 0.1 * seed);
    s.Add("no-pos", seed, seed == 1 ? model::RunState::kFailed : kDone, 1.05 + 0.1 * seed);
  }
  Plan plan = PlanSeeds(Adaptive(3, 6), s.runs, s.values);
  REQUIRE(plan.add.size() == 1);  // no-pos has 2 values: it needs its third first
  CHECK(plan.add[0].variant == "no-pos");
  CHECK(plan.add[0].seeds == std::vector<int64_t>{3});

  Study full;  // 4 runs each, max 4: undecided but nothing more to add
  for (int seed = 0; seed < 4; ++seed) {
    full.Add("baseline", seed, kDone, 1.0 + 0.1 * seed);
    full.Add("no-pos", seed, seed == 1 ? model::RunState::kFailed : kDone, 1.05 + 0.1 * seed);
  }
  CHECK(PlanSeeds(Adaptive(3, 4), full.runs, full.values).add.empty());
}

TEST_CASE("a cancelled run or a missing metric holds its comparison back, saying why") {
  Study cancelled;
  for (int seed = 0; seed < 3; ++seed) {
    cancelled.Add("baseline", seed, seed == 0 ? model::RunState::kCancelled : kDone,
                  1.0 + 0.1 * seed);
    cancelled.Add("no-pos", seed, kDone, 1.05 + 0.1 * seed);
  }
  Plan plan = PlanSeeds(Adaptive(3, 6), cancelled.runs, cancelled.values);
  CHECK(plan.add.empty());
  REQUIRE(plan.held.size() == 1);
  CHECK(plan.held[0] == "no-pos vs baseline: r1 was cancelled");

  Study silent;  // the runs never reported the metric: more seeds would not either
  for (int seed = 0; seed < 3; ++seed) {
    silent.Add("baseline", seed, kDone, 0, false);
    silent.Add("no-pos", seed, kDone, 0, false);
  }
  plan = PlanSeeds(Adaptive(3, 6), silent.runs, silent.values);
  CHECK(plan.add.empty());
  REQUIRE(plan.held.size() == 1);
  CHECK(plan.held[0] == "no-pos vs baseline: r2 succeeded without reporting score");
}

TEST_CASE("an arm below min seeds is brought up to min") {
  Study s;
  for (int seed = 0; seed < 3; ++seed) {
    s.Add("baseline", seed, kDone, 1.0 + 0.1 * seed);
  }
  s.Add("no-pos", 0, kDone, 1.0);
  Plan plan = PlanSeeds(Adaptive(3, 6), s.runs, s.values);
  REQUIRE(plan.add.size() == 1);
  CHECK(plan.add[0].variant == "no-pos");
  CHECK(plan.add[0].seeds == std::vector<int64_t>{1, 2});
  CHECK(plan.add[0].why == "every variant starts with 3 seeds");
}

}  // namespace tae::seeds
