// taectl report's renderings (common/report_text): the same numbers in every format,
// and the pivot of one metric over two keys.
#include "common/report_text/report_text.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

namespace tae::client {

using report_text::BuildPivot;
using report_text::ParsePivotSpec;
using report_text::Pivot;
using report_text::RenderPivot;
using report_text::RenderReport;
namespace {

tae::v1::ReportResponse TwoRows() {
  tae::v1::ReportResponse report;
  report.mutable_experiment()->set_id(7);
  report.mutable_experiment()->set_name("norms");
  report.mutable_experiment()->set_state("succeeded");
  report.set_baseline("baseline");
  report.add_metrics("eval/loss");
  tae::v1::ReportRow* base = report.add_rows();
  base->set_variant("baseline");
  base->set_baseline("baseline");
  base->set_runs(3);
  base->set_runs_total(3);
  base->set_params(103296);
  base->set_flops_per_token(NAN);
  base->set_tokens_per_s(61234.5);
  tae::v1::ReportCell* c = base->add_cells();
  c->set_metric("eval/loss");
  c->set_n(3);
  c->set_mean(2.0);
  c->set_std(1.0);
  c->set_ci95(2.4841);
  c->set_best(1.8);
  c->set_has_delta(true);
  c->set_delta(0.0);
  c->set_rel_delta(0.0);
  tae::v1::ReportRow* ablated = report.add_rows();
  ablated->set_variant("no_attn");
  ablated->set_baseline("baseline");
  ablated->set_runs(3);
  ablated->set_runs_total(4);
  ablated->set_params(70528);
  ablated->set_flops_per_token(140672);
  ablated->set_tokens_per_s(180012);
  c = ablated->add_cells();
  c->set_metric("eval/loss");
  c->set_n(3);
  c->set_mean(6.1667);
  c->set_std(1.2583);
  c->set_ci95(3.1258);
  c->set_best(6.0);
  c->set_has_delta(true);
  c->set_delta(4.1667);
  c->set_rel_delta(2.08335);
  c->set_has_test(true);
  c->set_p_value(0.0122);
  c->set_mark("*");
  c->set_p_adjusted(0.0244);
  c->set_delta_lo(1.25);
  c->set_delta_hi(7.0834);
  c->set_delta_level(0.025);
  c->set_decision("different");
  c->set_decision_n(3);
  c->set_level_kind("shortcut");
  tae::v1::ReportCorrection* family = report.mutable_correction();
  family->set_method("holm");
  family->set_alpha(0.05);
  family->set_controlled(true);
  family->set_family("the family-wise error rate of each metric's 2 comparisons at 0.05 (holm)");
  return report;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    start = end == std::string::npos ? text.size() : end + 1;
  }
  return lines;
}

TEST_CASE("report csv has one column per number, the decision and level, and empty unknowns",
          "[report]") {
  absl::StatusOr<std::string> csv = RenderReport(TwoRows(), "csv");
  REQUIRE(csv.ok());
  std::vector<std::string> lines = Lines(*csv);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] ==
        "variant,baseline,runs,runs_total,eval/loss:n,eval/loss:mean,eval/loss:ci95,eval/loss:std,"
        "eval/loss:best,eval/loss:delta,eval/loss:rel_delta,eval/loss:p_value,eval/loss:decision,"
        "eval/loss:decision_n,eval/loss:level,eval/loss:p_adjusted,eval/loss:delta_lo,"
        "eval/loss:delta_hi,params,flops_per_token,tokens_per_s");
  CHECK(lines[1] == "baseline,baseline,3,3,3,2,2.4841,1,1.8,0,0,,,,,,,,103296,,61234.5");
  CHECK(lines[2] ==
        "no_attn,baseline,3,4,3,6.1667,3.1258,1.2583,6,4.1667,2.08335,0.0122,different,3,shortcut,"
        "0.0244,1.25,7.0834,70528,140672,180012");
  // A peer that sends no interval (the fields read 0): empty, never "0,0".
  tae::v1::ReportResponse old = TwoRows();
  old.mutable_rows(1)->mutable_cells(0)->clear_delta_level();
  csv = RenderReport(old, "csv");
  REQUIRE(csv.ok());
  CHECK(Lines(*csv)[2].find("shortcut,,,,70528") != std::string::npos);
}

TEST_CASE("report table, markdown and latex show mean ± CI, delta, relative delta and marks",
          "[report]") {
  absl::StatusOr<std::string> table = RenderReport(TwoRows(), "table");
  REQUIRE(table.ok());
  CHECK(table->find("e7 norms (succeeded)") == 0);
  CHECK(table->find("6.1667 ± 3.1258") != std::string::npos);
  CHECK(table->find("+4.1667 [+1.2500, +7.0834] (+208.3%)") != std::string::npos);
  CHECK(table->find("different *") != std::string::npos);
  CHECK(table->find("103k") != std::string::npos);  // params, compact
  // The legend says what the verdicts control, and that the marks are on adjusted p.
  CHECK(table->find("Verdicts control the family-wise error rate of each metric's 2 comparisons") !=
        std::string::npos);
  CHECK(table->find("Holm-adjusted p") != std::string::npos);

  absl::StatusOr<std::string> md = RenderReport(TwoRows(), "md");
  REQUIRE(md.ok());
  std::vector<std::string> lines = Lines(*md);
  CHECK(lines[0].rfind("| variant | runs | eval/loss (±95% CI) |", 0) == 0);
  CHECK(lines[1].rfind("| --- | ---: |", 0) == 0);
  CHECK(lines[3].find("+4.1667 [+1.2500, +7.0834] (+208.3%) | different \\*") !=
        std::string::npos);  // * escaped
  CHECK(md->find("Verdicts control the family-wise error rate") != std::string::npos);

  absl::StatusOr<std::string> latex = RenderReport(TwoRows(), "latex");
  REQUIRE(latex.ok());
  CHECK(latex->find("\\begin{tabular}{lrrrrrrrr}") != std::string::npos);
  CHECK(latex->find("% Final values") == 0);  // the legend, as a comment
  CHECK(latex->find("\\toprule") != std::string::npos);
  CHECK(latex->find("no\\_attn") != std::string::npos);
  CHECK(latex->find("6.1667 $\\pm$ 3.1258") != std::string::npos);
  CHECK(latex->find("+4.1667 [+1.2500, +7.0834] (+208.3\\%)") != std::string::npos);
  CHECK(latex->find("different$^{*}$") != std::string::npos);
  CHECK(latex->find("\\bottomrule") != std::string::npos);

  CHECK_FALSE(RenderReport(TwoRows(), "html").ok());
}

tae::v1::Run PivotRun(int64_t id, const std::string& variant, const std::string& task, double loss,
                      tae::v1::RunState state = tae::v1::RUN_STATE_SUCCEEDED) {
  tae::v1::Run run;
  run.set_id(id);
  run.set_variant(variant);
  run.set_state(state);
  run.set_config_json(R"({"train.task": ")" + task + R"(", "model.layers": 2})");
  tae::v1::Scalar* s = run.add_final_metrics();
  s->set_key("eval/loss");
  s->set_value(loss);
  return run;
}

TEST_CASE("a pivot tabulates one metric over two keys, grid suffixes dropped", "[report]") {
  std::vector<tae::v1::Run> runs = {
      PivotRun(1, "baseline[task=copy]", "copy", 1.0),
      PivotRun(2, "baseline[task=copy]", "copy", 3.0),
      PivotRun(3, "rms[task=copy]", "copy", 5.0),
      PivotRun(4, "baseline[task=sort]", "sort", 7.0),
      PivotRun(5, "rms[task=sort]", "sort", 100.0, tae::v1::RUN_STATE_FAILED),  // not counted
  };
  absl::StatusOr<Pivot> pivot = BuildPivot(runs, "variant×train.task", "eval/loss");
  REQUIRE(pivot.ok());
  CHECK(pivot->rows == std::vector<std::string>{"baseline", "rms"});
  CHECK(pivot->cols == std::vector<std::string>{"copy", "sort"});
  // mean 2, sd sqrt(2), t_{0.975,1} = 12.7062: CI 12.7062 * sqrt(2) / sqrt(2) = 12.7062
  CHECK(pivot->cells[0][0] == "2.0000 ± 12.7062 (2)");
  CHECK(pivot->cells[0][1] == "7.0000 (1)");
  CHECK(pivot->cells[1][0] == "5.0000 (1)");
  CHECK(pivot->cells[1][1] == "-");
  CHECK(BuildPivot(runs, "variant,train.task", "eval/loss")->cells == pivot->cells);
  std::string text = RenderPivot(*pivot, "table");
  CHECK(text.find("variant \\ train.task") != std::string::npos);

  absl::StatusOr<Pivot> bad = BuildPivot(runs, "variant×train.tsk", "eval/loss");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("'train.tsk' is neither variant nor a key") !=
        std::string::npos);
  CHECK_FALSE(ParsePivotSpec("variant").ok());
}

}  // namespace
}  // namespace tae::client
