// search.confirm (server/seeds/confirm.h, server/report/tuned.h): the planner of the confirmation
// runs, the tuned table that reports them alone, and the winner's curse they remove, measured on
// simulated studies through the same code.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "server/report/report.h"
#include "server/report/tuned.h"
#include "server/seeds/confirm.h"
#include "server/seeds/seeds.h"

namespace tae::seeds {
namespace {

using model::RunState;

constexpr char kMetric[] = "eval/loss";

model::SearchSettings Confirm(int n, const std::string& goal = "min") {
  model::SearchSettings search;
  search.declared = true;
  search.metric = kMetric;
  search.goal = goal;
  search.confirm = n;
  return search;
}

struct Study {
  std::vector<model::RunRecord> runs;
  std::vector<model::FinalValue> values;
  std::vector<std::string> variants;  // by first run
  // A run of `variant` at `seed` in `state`; a succeeded one reports `value`.
  int64_t Add(const std::string& variant, int64_t seed, RunState state, double value = 0,
              bool confirm = false) {
    model::RunRecord run;
    run.id = static_cast<int64_t>(runs.size()) + 1;
    run.variant = variant;
    run.seed = seed;
    run.state = state;
    run.confirm = confirm;
    run.config_json = "{}";
    runs.push_back(run);
    if (std::find(variants.begin(), variants.end(), variant) == variants.end()) {
      variants.push_back(variant);
    }
    if (state == RunState::kSucceeded) {
      values.push_back({run.id, variant, seed, state, kMetric, value, value, value, confirm,
                        std::nullopt});
    }
    return run.id;
  }
  // What PlanConfirm asks for, added as queued confirmation runs (as taed adds them).
  void AddPlanned(const ConfirmPlan& plan) {
    for (const ConfirmRuns& add : plan.add) {
      for (int64_t seed : add.seeds) {
        Add(add.variant, seed, RunState::kQueued, 0, true);
      }
    }
  }
};

constexpr auto kDone = RunState::kSucceeded;

// baseline and no-pos at lr 0.1, 0.01, 0.001 with seeds 0..2; the baseline is best at 0.01
// (loss 1.0), no-pos at 0.001 (loss 2.0).
Study ThreePoints() {
  Study s;
  const double base[] = {1.5, 1.0, 1.2};
  const double ablation[] = {3.0, 2.5, 2.0};
  const char* lrs[] = {"0.1", "0.01", "0.001"};
  for (int p = 0; p < 3; ++p) {
    for (int seed = 0; seed < 3; ++seed) {
      s.Add(std::string("baseline[lr=") + lrs[p] + "]", seed, kDone, base[p] + 0.01 * seed);
      s.Add(std::string("no-pos[lr=") + lrs[p] + "]", seed, kDone, ablation[p] + 0.01 * seed);
    }
  }
  return s;
}

TEST_CASE("confirm plans fresh seeds at each variant's chosen point once the search is over",
          "[confirm][seeds]") {
  Study s = ThreePoints();
  const ConfirmPlan plan = PlanConfirm(Confirm(3), s.runs, s.values);
  CHECK(plan.held.empty());
  REQUIRE(plan.add.size() == 2);
  CHECK(plan.add[0].variant == "baseline[lr=0.01]");
  CHECK(plan.add[1].variant == "no-pos[lr=0.001]");
  for (const ConfirmRuns& add : plan.add) {
    INFO(add.variant);
    CHECK(add.seeds == std::vector<int64_t>{3, 4, 5});  // above the experiment's highest seed
    const model::RunRecord& like = s.runs.at(static_cast<size_t>(add.like_run - 1));
    CHECK(like.variant == add.variant);
    CHECK(like.seed == 0);  // the point's lowest-seed run
    CHECK_FALSE(like.confirm);
    for (const model::RunRecord& run : s.runs) {  // no seed of the point is reused
      if (run.variant == add.variant) {
        CHECK(std::find(add.seeds.begin(), add.seeds.end(), run.seed) == add.seeds.end());
      }
    }
  }
  CHECK(plan.add[0].why == "lr=0.01 chosen on eval/loss (min): 1.01 over 3 seeds, best of 3 points");
  // Larger is better: the other end.
  const ConfirmPlan max = PlanConfirm(Confirm(2, "max"), s.runs, s.values);
  REQUIRE(max.add.size() == 2);
  CHECK(max.add[0].variant == "baseline[lr=0.1]");
  CHECK(max.add[1].variant == "no-pos[lr=0.1]");
  CHECK(max.add[0].seeds == std::vector<int64_t>{3, 4});
  // No confirmation asked: nothing.
  CHECK(PlanConfirm(Confirm(0), s.runs, s.values).add.empty());
}

TEST_CASE("confirm adds nothing twice and its runs never move the choice", "[confirm][seeds]") {
  Study s = ThreePoints();
  s.AddPlanned(PlanConfirm(Confirm(3), s.runs, s.values));
  REQUIRE(s.runs.size() == 18 + 6);
  // Computed again (a second run end, a restart): nothing more, pending or not.
  CHECK(PlanConfirm(Confirm(3), s.runs, s.values).add.empty());
  // The confirmation runs end, the baseline's much worse than its other points: the choice is
  // still the search's, so nothing is added at another point.
  for (model::RunRecord& run : s.runs) {
    if (run.confirm) {
      run.state = kDone;
      s.values.push_back({run.id, run.variant, run.seed, kDone, kMetric, 9.0, 9.0, 9.0, true,
                          std::nullopt});
    }
  }
  const ConfirmPlan again = PlanConfirm(Confirm(3), s.runs, s.values);
  CHECK(again.add.empty());
  CHECK(again.held.empty());
  // A larger search.confirm tops the points up with seeds above every seed so far.
  const ConfirmPlan more = PlanConfirm(Confirm(5), s.runs, s.values);
  REQUIRE(more.add.size() == 2);
  CHECK(more.add[0].variant == "baseline[lr=0.01]");
  CHECK(more.add[0].seeds == std::vector<int64_t>{6, 7});
}

TEST_CASE("confirm waits for the search to end and holds after a cancel", "[confirm][seeds]") {
  Study s = ThreePoints();
  s.runs[4].state = RunState::kRunning;
  CHECK(PlanConfirm(Confirm(3), s.runs, s.values).add.empty());
  s.runs[4].state = RunState::kQueued;
  CHECK(PlanConfirm(Confirm(3), s.runs, s.values).add.empty());
  s.runs[4].state = RunState::kCancelled;
  const ConfirmPlan held = PlanConfirm(Confirm(3), s.runs, s.values);
  CHECK(held.add.empty());
  CHECK(held.held == "r5 was cancelled, so the search is not confirmed");
  // Failed and pruned runs are final: the search is over without them.
  s.runs[4].state = RunState::kFailed;
  CHECK(PlanConfirm(Confirm(3), s.runs, s.values).add.size() == 2);
  CHECK(PlanConfirm(Confirm(3), {}, {}).add.empty());
}

TEST_CASE("confirm skips a variant without a candidate point", "[confirm][seeds]") {
  Study s;
  for (int seed = 0; seed < 2; ++seed) {
    s.Add("baseline[lr=0.1]", seed, kDone, 1.0);
    s.Add("baseline[lr=0.01]", seed, kDone, 0.5);
    s.Add("no-pos[lr=0.1]", seed, RunState::kPruned);
    s.Add("no-pos[lr=0.01]", seed, RunState::kFailed);
  }
  const ConfirmPlan plan = PlanConfirm(Confirm(2), s.runs, s.values);
  REQUIRE(plan.add.size() == 1);
  CHECK(plan.add[0].variant == "baseline[lr=0.01]");
  CHECK(plan.add[0].seeds == std::vector<int64_t>{2, 3});
}

TEST_CASE("adaptive seeds leave confirmation runs out of the points' arms", "[confirm][seeds]") {
  Study s;
  model::ExperimentReport report;
  report.metrics = {kMetric};
  report.min_seeds = 2;
  report.max_seeds = 4;
  s.Add("baseline", 0, kDone, 1.0);
  s.Add("no-pos", 0, kDone, 1.0);
  // A confirmation run is not the second seed that min = 2 asks for.
  s.Add("baseline", 7, kDone, 1.0, true);
  s.Add("no-pos", 7, kDone, 1.0, true);
  const Plan plan = PlanSeeds(report, s.runs, s.values);
  REQUIRE(plan.add.size() == 2);
  CHECK(plan.add[0].seeds == std::vector<int64_t>{1});
}

}  // namespace
}  // namespace tae::seeds

namespace tae::report {
namespace {

using model::RunState;
using seeds::Study;

TEST_CASE("the confirmed tuned table is the chosen points' confirmation runs alone",
          "[confirm][report][tuned]") {
  Study s = seeds::ThreePoints();
  ReportOptions options;
  options.confirm = 2;
  const std::vector<std::string> metrics = {seeds::kMetric};
  // During the search: the choice, no values, and the estimates say what is pending.
  std::vector<Row> rows = BuildTunedReport(s.variants, s.runs, s.values, metrics, seeds::kMetric,
                                           false, "baseline", {}, options);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].point == "lr=0.01");
  CHECK(rows[0].cells[0].n == 0);
  CHECK(rows[0].runs_total == 0);
  CHECK(TunedEstimates(2, rows) ==
        "pending: 4 of 4 confirmation runs (2 fresh seeds per chosen point) not finished");
  s.AddPlanned(seeds::PlanConfirm(seeds::Confirm(2), s.runs, s.values));
  // One confirmation run of each point ends.
  const double confirmed[] = {1.3, 1.5, 2.6, 2.8};  // baseline: 1.3 1.5, no-pos: 2.6 2.8
  int i = 0;
  for (model::RunRecord& run : s.runs) {
    if (run.confirm && run.seed == 3) {
      run.state = RunState::kSucceeded;
      s.values.push_back({run.id, run.variant, run.seed, run.state, seeds::kMetric,
                          confirmed[i], confirmed[i], confirmed[i], true, std::nullopt});
      i += 2;
    }
  }
  rows = BuildTunedReport(s.variants, s.runs, s.values, metrics, seeds::kMetric, false,
                          "baseline", {}, options);
  CHECK(rows[0].confirm_runs == 2);
  CHECK(rows[0].confirm_pending == 1);
  CHECK(rows[0].cells[0].n == 1);
  CHECK(rows[0].cells[0].mean == Approx(1.3));
  CHECK(TunedEstimates(2, rows) ==
        "pending: 2 of 4 confirmation runs (2 fresh seeds per chosen point) not finished");
  i = 1;
  for (model::RunRecord& run : s.runs) {
    if (run.confirm && run.seed == 4) {
      run.state = RunState::kSucceeded;
      s.values.push_back({run.id, run.variant, run.seed, run.state, seeds::kMetric,
                          confirmed[i], confirmed[i], confirmed[i], true, std::nullopt});
      i += 2;
    }
  }
  rows = BuildTunedReport(s.variants, s.runs, s.values, metrics, seeds::kMetric, false,
                          "baseline", {}, options);
  CHECK(TunedEstimates(2, rows) == "confirmed: 2 fresh seeds");
  // The confirmation runs moved no choice, and the rows are theirs: n, mean, runs and delta.
  CHECK(rows[0].variant == "baseline[lr=0.01]");
  CHECK(rows[1].variant == "no-pos[lr=0.001]");
  CHECK(rows[0].runs == 2);
  CHECK(rows[0].runs_total == 2);
  CHECK(rows[0].cells[0].n == 2);
  CHECK(rows[0].cells[0].mean == Approx(1.4));
  CHECK(rows[1].cells[0].n == 2);
  CHECK(rows[1].cells[0].mean == Approx(2.7));
  CHECK(rows[1].cells[0].delta == Approx(1.3));
  CHECK(rows[1].confirm_pending == 0);
  // Without confirmation the same table is the search's seeds, and says it is optimistic.
  rows = BuildTunedReport(s.variants, s.runs, s.values, metrics, seeds::kMetric, false,
                          "baseline", {}, ReportOptions{});
  CHECK(rows[0].cells[0].n == 3);
  CHECK(rows[0].cells[0].mean == Approx(1.01));
  CHECK(TunedEstimates(0, rows) == "optimistic: chosen on the same seeds");
  // The grid report is the search's runs at every point: no confirmation run among them.
  const std::vector<Row> grid =
      BuildReport(s.variants, s.runs, s.values, metrics, "baseline", {}, ReportOptions{});
  REQUIRE(grid.size() == 6);
  CHECK(grid[2].variant == "baseline[lr=0.01]");
  CHECK(grid[2].runs_total == 3);
  CHECK(grid[2].cells[0].n == 3);
  CHECK(grid[2].cells[0].mean == Approx(1.01));
}

// The winner's curse, simulated: K grid points of one variant with the same true mean, n seeds
// each with noise sigma. The tuned table's estimate at the chosen point is biased by
// -sigma / sqrt(n) * E[max of K standard normals] when it picks the lowest (+ for the highest);
// the confirmation runs' estimate is not. Each simulated study goes through the real planner
// (seeds::PlanConfirm) and table (BuildTunedReport).
struct Bias {
  double mean = 0;
  double se = 0;  // its Monte-Carlo standard error
};

Bias Summarize(const std::vector<double>& xs) {
  double sum = 0;
  for (double x : xs) {
    sum += x;
  }
  const double mean = sum / static_cast<double>(xs.size());
  double ss = 0;
  for (double x : xs) {
    ss += (x - mean) * (x - mean);
  }
  const double sd = std::sqrt(ss / static_cast<double>(xs.size() - 1));
  return {mean, sd / std::sqrt(static_cast<double>(xs.size()))};
}

TEST_CASE("the tuned estimate is optimistic by the expected max of K normals and confirmed is not",
          "[confirm][report][tuned][simulation]") {
  constexpr int kPoints = 9;
  constexpr int kSeeds = 3;
  constexpr int kConfirm = 3;
  constexpr int kStudies = 4000;
  constexpr double kSigma = 0.2;
  constexpr double kTrue = 2.0;
  // E[max of 9 independent standard normals].
  constexpr double kExpectedMax9 = 1.4850;
  const std::vector<std::string> metrics = {seeds::kMetric};
  for (const std::string goal : {"min", "max"}) {
    INFO("goal " << goal);
    std::mt19937_64 rng(goal == "min" ? 36 : 37);
    std::normal_distribution<double> noise(0.0, kSigma);
    std::vector<double> searched;
    std::vector<double> confirmed;
    for (int study = 0; study < kStudies; ++study) {
      Study s;
      for (int p = 0; p < kPoints; ++p) {
        for (int seed = 0; seed < kSeeds; ++seed) {
          s.Add("baseline[lr=" + std::to_string(p) + "]", seed, RunState::kSucceeded,
                kTrue + noise(rng));
        }
      }
      const bool maximize = goal == "max";
      ReportOptions plain;
      const std::vector<Row> optimistic = BuildTunedReport(
          s.variants, s.runs, s.values, metrics, seeds::kMetric, maximize, "baseline", {}, plain);
      searched.push_back(optimistic.at(0).cells.at(0).mean - kTrue);
      // taed's confirmation: the planned runs, each ending with a fresh draw.
      const seeds::ConfirmPlan plan =
          seeds::PlanConfirm(seeds::Confirm(kConfirm, goal), s.runs, s.values);
      REQUIRE(plan.add.size() == 1);
      REQUIRE(plan.add[0].variant == optimistic.at(0).variant);
      for (int64_t seed : plan.add[0].seeds) {
        s.Add(plan.add[0].variant, seed, RunState::kSucceeded, kTrue + noise(rng), true);
      }
      ReportOptions confirm;
      confirm.confirm = kConfirm;
      const std::vector<Row> rows = BuildTunedReport(
          s.variants, s.runs, s.values, metrics, seeds::kMetric, maximize, "baseline", {}, confirm);
      REQUIRE(rows.at(0).cells.at(0).n == kConfirm);
      REQUIRE(rows.at(0).variant == optimistic.at(0).variant);
      confirmed.push_back(rows.at(0).cells.at(0).mean - kTrue);
    }
    const double sign = goal == "max" ? 1.0 : -1.0;
    const double expected = sign * kSigma / std::sqrt(double{kSeeds}) * kExpectedMax9;
    const Bias without = Summarize(searched);
    const Bias with = Summarize(confirmed);
    // The figures, for the record.
    WARN("goal " << goal << ": " << kStudies << " studies of " << kPoints << " points x "
                 << kSeeds << " seeds, sigma " << kSigma << ": bias without confirmation "
                 << without.mean << " (SE " << without.se << ", expected " << expected
                 << "); with " << kConfirm << " fresh seeds " << with.mean << " (SE " << with.se
                 << ")");
    CHECK(std::fabs(without.mean - expected) < 4 * without.se);
    CHECK(std::fabs(with.mean) < 4 * with.se);
    // And the difference is not a matter of luck: the optimistic bias is many SEs from zero.
    CHECK(std::fabs(without.mean) > 20 * without.se);
  }
}

}  // namespace
}  // namespace tae::report
