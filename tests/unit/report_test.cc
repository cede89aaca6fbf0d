#include "server/report/report.h"

#include <catch2/catch.hpp>

namespace tae::report {
namespace {

store::RunRecord Run(int64_t id, const std::string& variant, store::RunState state) {
  store::RunRecord run;
  run.id = id;
  run.variant = variant;
  run.state = state;
  return run;
}

}  // namespace

TEST_CASE("the report gives mean, sample std over seeds and delta against the baseline") {
  using store::RunState;
  std::vector<store::RunRecord> runs = {
      Run(1, "baseline", RunState::kSucceeded), Run(2, "baseline", RunState::kSucceeded),
      Run(3, "baseline", RunState::kSucceeded), Run(4, "no-attn", RunState::kSucceeded),
      Run(5, "no-attn", RunState::kFailed)};
  std::vector<store::FinalValue> values = {
      {1, "baseline", 0, RunState::kSucceeded, "eval/loss", 1.0},
      {2, "baseline", 1, RunState::kSucceeded, "eval/loss", 2.0},
      {3, "baseline", 2, RunState::kSucceeded, "eval/loss", 3.0},
      {4, "no-attn", 0, RunState::kSucceeded, "eval/loss", 5.0},
      {5, "no-attn", 1, RunState::kFailed, "eval/loss", 100.0},  // failed runs do not count
  };
  std::vector<Row> rows =
      BuildReport({"baseline", "no-attn"}, runs, values, {"eval/loss", "eval/acc"}, "baseline");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].variant == "baseline");
  CHECK(rows[0].runs == 3);
  CHECK(rows[0].runs_total == 3);
  const Cell& base = rows[0].cells[0];
  CHECK(base.n == 3);
  CHECK(base.mean == Approx(2.0));
  CHECK(base.std == Approx(1.0));  // sample std of 1, 2, 3
  CHECK(base.delta == Approx(0.0));
  const Cell& ablated = rows[1].cells[0];
  CHECK(rows[1].runs == 1);
  CHECK(rows[1].runs_total == 2);
  CHECK(ablated.n == 1);
  CHECK(ablated.mean == Approx(5.0));
  CHECK(ablated.std == 0.0);
  CHECK(ablated.has_delta);
  CHECK(ablated.delta == Approx(3.0));
  // eval/acc was never reported: no values, no delta.
  CHECK(rows[1].cells[1].n == 0);
  CHECK_FALSE(rows[1].cells[1].has_delta);
}

TEST_CASE("without the baseline variant there are no deltas") {
  std::vector<store::FinalValue> values = {
      {1, "a", 0, store::RunState::kSucceeded, "eval/loss", 1.0}};
  std::vector<Row> rows = BuildReport({"a"}, {Run(1, "a", store::RunState::kSucceeded)}, values,
                                      {"eval/loss"}, "baseline");
  REQUIRE(rows.size() == 1);
  CHECK_FALSE(rows[0].cells[0].has_delta);
}

}  // namespace tae::report
