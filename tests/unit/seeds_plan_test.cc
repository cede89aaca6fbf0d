// server/seeds: which runs an adaptive experiment adds, as a pure function of its stored runs.

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
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
      values.push_back(
          {run.id, variant, seed, state, "score", value, value, value, false, std::nullopt});
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
    // Undecided (p = 0.31), not futile at the family's share of alpha (0.05 / 3 comparisons).
    s.Add("a[lr=1]", seed, kDone, 1.1 + 0.1 * seed);
    s.Add("b[lr=1]", seed, kDone, 0.9 + 0.1 * seed);
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

TEST_CASE("a failed seed is not replaced: the comparison is held there and says why") {
  Study s;
  int64_t failed_run = 0;
  for (int seed = 0; seed < 3; ++seed) {
    s.Add("baseline", seed, kDone, 1.0 + 0.1 * seed);
    const int64_t id =
        s.Add("no-pos", seed, seed == 1 ? model::RunState::kFailed : kDone, 1.05 + 0.1 * seed);
    failed_run = seed == 1 ? id : failed_run;
  }
  Plan plan = PlanSeeds(Adaptive(3, 6), s.runs, s.values);
  CHECK(plan.add.empty());  // the old rule gave no-pos seed 3 in seed 1's place
  REQUIRE(plan.held.size() == 1);
  CHECK(plan.held[0] == absl::StrCat("no-pos vs baseline: r", failed_run, " failed"));

  // A failed baseline seed (grown for a sibling) past the comparison's next look: it still grows
  // to the look before the failure, and is held there.
  Study later;
  for (int seed = 0; seed < 4; ++seed) {
    later.Add("baseline", seed, kDone, 1.0 + 0.1 * seed);
    if (seed < 3) {
      later.Add("no-pos", seed, kDone, 1.05 + 0.1 * seed);
    }
  }
  const int64_t lost = later.Add("baseline", 4, model::RunState::kFailed);
  plan = PlanSeeds(Adaptive(3, 6), later.runs, later.values);
  REQUIRE(plan.add.size() == 1);
  CHECK(plan.add[0].variant == "no-pos");  // its look at 4 needs its seed 3
  CHECK(plan.add[0].seeds == std::vector<int64_t>{3});
  CHECK(plan.held.empty());
  later.Add("no-pos", 3, kDone, 1.7);  // undecided, not futile at n = 4: its look at 5 needs r5
  plan = PlanSeeds(Adaptive(3, 6), later.runs, later.values);
  CHECK(plan.add.empty());
  REQUIRE(plan.held.size() == 1);
  CHECK(plan.held[0] == absl::StrCat("no-pos vs baseline: r", lost, " failed"));
}

TEST_CASE("a comparison decided at a look stays decided when its baseline grows for a sibling") {
  // a vs baseline is futile at n = 3 (a delta of 0.01 on a spread of 0.1); b vs baseline is still
  // undecided at n = 5, so the baseline grew to 5 seeds. On all five baseline values a's comparison
  // reads undecided again (the old rule), which gave a a fourth seed and could flip its verdict.
  const std::vector<double> base = {1.0, 1.1, 1.2, 1.5, 1.6};
  const std::vector<double> b = {1.35, 1.3, 1.7, 1.8, 1.85};
  Study s;
  for (int seed = 0; seed < 5; ++seed) {
    s.Add("baseline", seed, kDone, base[seed]);
    if (seed < 3) {
      s.Add("a", seed, kDone, base[seed] + 0.01);
    }
    s.Add("b", seed, kDone, b[seed]);
  }
  const model::ExperimentReport report = Adaptive(3, 6);
  const stats::SequentialDesign design = DesignOf(report, "score");
  const stats::Boundaries boundaries = stats::ComputeBoundaries(design);
  REQUIRE(stats::Decide(design, boundaries, {1.01, 1.11, 1.21}, {1.0, 1.1, 1.2}).futile);
  REQUIRE_FALSE(stats::Decide(design, boundaries, {1.01, 1.11, 1.21}, base).final);  // old rule

  const Plan plan = PlanSeeds(report, s.runs, s.values);
  REQUIRE(plan.add.size() == 2);
  CHECK(plan.add[0].variant == "baseline");
  CHECK(plan.add[0].seeds == std::vector<int64_t>{5});
  CHECK(plan.add[1].variant == "b");
  CHECK(plan.add[1].seeds == std::vector<int64_t>{5});
  CHECK(plan.add[1].why.rfind("score: b vs baseline undecided at n=5", 0) == 0);
  CHECK(plan.held.empty());

  const auto outcomes = SeedOutcomes(s.runs, s.values, "score");
  const stats::Course course =
      stats::FollowLooks(design, boundaries, outcomes.at("a"), outcomes.at("baseline"));
  CHECK(course.verdict.futile);
  CHECK(course.verdict.n == 3);
}

TEST_CASE("planning again after the plan was applied adds nothing twice") {
  Study s;
  for (int seed = 0; seed < 3; ++seed) {
    s.Add("baseline", seed, kDone, 1.0 + 0.1 * seed);
    s.Add("no-pos", seed, kDone, 1.05 + 0.1 * seed);
    s.Add("rope", seed, kDone, 0.95 + 0.1 * seed);
  }
  const Plan first = PlanSeeds(Adaptive(3, 6), s.runs, s.values);
  REQUIRE(first.add.size() == 3);
  // The same stored state planned twice (a restart before the runs were added) asks the same.
  const Plan again = PlanSeeds(Adaptive(3, 6), s.runs, s.values);
  REQUIRE(again.add.size() == first.add.size());
  for (size_t i = 0; i < first.add.size(); ++i) {
    CHECK(again.add[i].variant == first.add[i].variant);
    CHECK(again.add[i].seeds == first.add[i].seeds);
  }
  // Once added (queued), a restart plans nothing more, and neither does one of them finishing.
  for (const NewSeeds& add : first.add) {
    for (int64_t seed : add.seeds) {
      s.Add(add.variant, seed, model::RunState::kQueued);
    }
  }
  CHECK(PlanSeeds(Adaptive(3, 6), s.runs, s.values).add.empty());
  s.runs.back().state = kDone;
  s.values.push_back({s.runs.back().id, s.runs.back().variant, s.runs.back().seed, kDone, "score",
                      1.3, 1.3, 1.3, false, std::nullopt});
  CHECK(PlanSeeds(Adaptive(3, 6), s.runs, s.values).add.empty());
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
