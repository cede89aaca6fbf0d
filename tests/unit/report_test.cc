// The ablation table's numbers (server/report) on runs with known final values. References: the
// closed form of Student's t quantile for 2 degrees of freedom, t = (2p - 1) / sqrt(2p(1 - p)),
// for the CIs, and scipy 1.10's stats.ttest_ind(a, b, equal_var=False) for Welch's test (its p at
// the table's calibrated dof: scipy.stats.t.sf).
#include "server/report/report.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace tae::report {
namespace {

using model::RunState;

model::RunRecord Run(int64_t id, const std::string& variant, RunState state) {
  model::RunRecord run;
  run.id = id;
  run.variant = variant;
  run.state = state;
  return run;
}

model::FinalValue Value(int64_t run, const std::string& variant, const std::string& key,
                        double last, double min, double max,
                        RunState state = RunState::kSucceeded) {
  return {run, variant, 0, state, key, last, min, max, false, std::nullopt};
}

}  // namespace

TEST_CASE("the report gives mean, 95% CI, best, deltas and Welch's p against the baseline",
          "[report]") {
  std::vector<model::RunRecord> runs = {
      Run(1, "baseline", RunState::kSucceeded), Run(2, "baseline", RunState::kSucceeded),
      Run(3, "baseline", RunState::kSucceeded), Run(4, "no-attn", RunState::kSucceeded),
      Run(5, "no-attn", RunState::kSucceeded),  Run(6, "no-attn", RunState::kSucceeded),
      Run(7, "no-attn", RunState::kFailed)};
  std::vector<model::FinalValue> values = {
      Value(1, "baseline", "eval/loss", 1.0, 0.9, 5.0),
      Value(2, "baseline", "eval/loss", 2.0, 1.8, 5.0),
      Value(3, "baseline", "eval/loss", 3.0, 2.7, 5.0),
      Value(4, "no-attn", "eval/loss", 5.0, 5.0, 6.0),
      Value(5, "no-attn", "eval/loss", 6.0, 6.0, 6.0),
      Value(6, "no-attn", "eval/loss", 7.5, 7.0, 8.0),
      Value(7, "no-attn", "eval/loss", 100.0, 1.0, 100.0, RunState::kFailed),  // not counted
      Value(1, "baseline", "eval/acc", 0.5, 0.1, 0.6),
      Value(4, "no-attn", "eval/acc", 0.2, 0.1, 0.3),
      Value(1, "baseline", "model/params", 1000, 1000, 1000),
      Value(4, "no-attn", "model/params", 600, 600, 600),
      Value(4, "no-attn", "perf/tokens_per_s", 2e4, 1e4, 3e4),
  };
  std::vector<Row> rows =
      BuildReport({"baseline", "no-attn"}, runs, values, {"eval/loss", "eval/acc"}, "baseline");
  REQUIRE(rows.size() == 2);
  const Row& base_row = rows[0];
  CHECK(base_row.variant == "baseline");
  CHECK(base_row.baseline == "baseline");
  CHECK(base_row.runs == 3);
  const Cell& base = base_row.cells[0];
  CHECK(base.n == 3);
  CHECK(base.mean == Approx(2.0));
  CHECK(base.std == Approx(1.0));
  const double t975 = 0.95 / std::sqrt(2 * 0.975 * 0.025);  // t_{0.975, 2} = 4.3026527...
  CHECK(base.ci95 == Approx(t975 * 1.0 / std::sqrt(3.0)).epsilon(1e-12));
  CHECK(base.best == Approx((0.9 + 1.8 + 2.7) / 3));  // a loss: the runs' minima
  CHECK(base.delta == 0.0);
  CHECK_FALSE(base.has_test);

  const Row& ablated_row = rows[1];
  CHECK(ablated_row.runs == 3);
  CHECK(ablated_row.runs_total == 4);
  const Cell& ablated = ablated_row.cells[0];
  CHECK(ablated.n == 3);
  CHECK(ablated.mean == Approx(6.166666666666667));
  const double sd = std::sqrt(((5 - 6.1666666666666667) * (5 - 6.1666666666666667) +
                               (6 - 6.1666666666666667) * (6 - 6.1666666666666667) +
                               (7.5 - 6.1666666666666667) * (7.5 - 6.1666666666666667)) /
                              2);
  CHECK(ablated.ci95 == Approx(t975 * sd / std::sqrt(3.0)).epsilon(1e-12));
  CHECK(ablated.delta == Approx(4.166666666666667));
  CHECK(ablated.rel_delta == Approx(4.166666666666667 / 2.0));
  REQUIRE(ablated.has_test);
  // Welch's t (scipy: p = 0.012214553123135111 at 3.806 dof) with the table's calibrated dof,
  // 2 + (3.806 - 2) / 4 = 2.451 (stats::TableDof): 2 * scipy.stats.t.sf(|t|, 2.451).
  CHECK(ablated.p_value == Approx(0.031244547358878053).epsilon(1e-9));
  CHECK(ablated.p_adjusted == ablated.p_value);  // one comparison in eval/loss's family
  CHECK(ablated.mark == "*");
  CHECK(ablated.decision == "different");
  CHECK(ablated.delta_level == Approx(0.05));
  CHECK(ablated.delta_lo > 0);

  // eval/acc: one run each: a mean and a delta but no CI and no test; best is the maximum.
  const Cell& acc = ablated_row.cells[1];
  CHECK(acc.n == 1);
  CHECK(std::isnan(acc.ci95));
  CHECK(acc.best == Approx(0.3));
  CHECK(acc.delta == Approx(-0.3));
  CHECK_FALSE(acc.has_test);

  CHECK(ablated_row.params == 600);
  CHECK(ablated_row.tokens_per_s == 2e4);
  CHECK(std::isnan(ablated_row.flops_per_token));  // never reported
}

TEST_CASE("grid variants are compared with the baseline at their own grid point", "[report]") {
  std::vector<model::RunRecord> runs;
  std::vector<model::FinalValue> values;
  const std::vector<std::pair<std::string, double>> finals = {{"baseline[layers=1]", 1.0},
                                                              {"baseline[layers=2]", 10.0},
                                                              {"x[layers=1]", 1.5},
                                                              {"x[layers=2]", 9.0}};
  int64_t id = 0;
  std::vector<std::string> variants;
  for (const auto& [variant, value] : finals) {
    runs.push_back(Run(++id, variant, RunState::kSucceeded));
    values.push_back(Value(id, variant, "eval/loss", value, value, value));
    variants.push_back(variant);
  }
  std::vector<Row> rows = BuildReport(variants, runs, values, {"eval/loss"}, "baseline");
  REQUIRE(rows.size() == 4);
  CHECK(rows[2].baseline == "baseline[layers=1]");
  CHECK(rows[2].cells[0].delta == Approx(0.5));
  CHECK(rows[3].baseline == "baseline[layers=2]");
  CHECK(rows[3].cells[0].delta == Approx(-1.0));
  CHECK(rows[3].cells[0].rel_delta == Approx(-0.1));

  SortByEffect(&rows);  // baselines first, then |relative delta|: 0.5 before 0.1
  CHECK(rows[0].variant == "baseline[layers=1]");
  CHECK(rows[1].variant == "baseline[layers=2]");
  CHECK(rows[2].variant == "x[layers=1]");
  CHECK(rows[3].variant == "x[layers=2]");
}

TEST_CASE("without the baseline variant there are no deltas", "[report]") {
  std::vector<model::FinalValue> values = {Value(1, "a", "eval/loss", 1.0, 1.0, 1.0)};
  std::vector<Row> rows =
      BuildReport({"a"}, {Run(1, "a", RunState::kSucceeded)}, values, {"eval/loss"}, "baseline");
  REQUIRE(rows.size() == 1);
  CHECK_FALSE(rows[0].cells[0].has_delta);
}

TEST_CASE("higher is better for accuracies and throughput only", "[report]") {
  CHECK(HigherIsBetter("eval/acc"));
  CHECK(HigherIsBetter("eval/seq_acc"));
  CHECK(HigherIsBetter("perf/tokens_per_s"));
  CHECK_FALSE(HigherIsBetter("eval/loss"));
  CHECK_FALSE(HigherIsBetter("eval/ppl"));
}

}  // namespace tae::report
