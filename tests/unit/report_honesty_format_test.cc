// taectl report and --json on decided comparisons and sanity floors: an undecided delta is shown
// with its interval and reads "undecided (n=3; detects |Δ|≥x)", an equivalent one "equivalent
// within ±m", a baseline at a shortcut gets a
// banner over the table, and the JSON carries decision, n, level and banners.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "common/report_text/report_text.h"
#include "common/api/json.h"

namespace tae::client {

using report_text::RenderReport;
namespace {

constexpr char kBanner[] =
    "eval/acc: baseline is at the most-frequent-value shortcut (0.325): this table cannot show "
    "the lookup mechanism";

tae::v1::ReportCell* AddCell(tae::v1::ReportRow* row, double mean, double ci95) {
  tae::v1::ReportCell* cell = row->add_cells();
  cell->set_metric("eval/acc");
  cell->set_n(3);
  cell->set_mean(mean);
  cell->set_std(ci95 / 2.5);
  cell->set_ci95(ci95);
  cell->set_best(mean);
  cell->set_has_delta(true);
  return cell;
}

tae::v1::ReportRow* AddRow(tae::v1::ReportResponse* report, const std::string& variant) {
  tae::v1::ReportRow* row = report->add_rows();
  row->set_variant(variant);
  row->set_baseline("baseline");
  row->set_runs(3);
  row->set_runs_total(3);
  row->set_params(NAN);
  row->set_flops_per_token(NAN);
  row->set_tokens_per_s(NAN);
  return row;
}

// assoc_recall at the defaults: the baseline at the shortcut, one layer undecided, no attention
// different and at chance, a tied-embedding variant equivalent within 0.02.
tae::v1::ReportResponse ShortcutStudy() {
  tae::v1::ReportResponse report;
  report.mutable_experiment()->set_id(3);
  report.mutable_experiment()->set_name("mqar");
  report.mutable_experiment()->set_state("succeeded");
  report.set_baseline("baseline");
  report.add_metrics("eval/acc");
  report.add_banners(kBanner);
  tae::v1::ReportCell* cell = AddCell(AddRow(&report, "baseline"), 0.3210, 0.0236);
  cell->set_delta(0);
  cell->set_rel_delta(0);
  cell->set_level_kind("shortcut");
  cell->set_level(0.3247);
  cell->set_level_what("the most-frequent-value shortcut");

  cell = AddCell(AddRow(&report, "one-layer"), 0.3193, 0.0125);
  cell->set_delta(-0.0017);
  cell->set_rel_delta(-0.0053);
  cell->set_has_test(true);
  cell->set_p_value(0.82);
  cell->set_p_adjusted(1.0);
  cell->set_delta_lo(-0.02);
  cell->set_delta_hi(0.0166);
  cell->set_delta_level(0.025);
  cell->set_detectable(0.03);
  cell->set_decision("undecided");
  cell->set_decision_n(3);
  cell->set_decision_final(true);
  cell->set_level_kind("shortcut");
  cell->set_level(0.3247);

  cell = AddCell(AddRow(&report, "no-attn"), 0.1317, 0.0099);
  cell->set_delta(-0.1893);
  cell->set_rel_delta(-0.5897);
  cell->set_has_test(true);
  cell->set_p_value(0.0002);
  cell->set_p_adjusted(0.0004);
  cell->set_delta_lo(-0.21);
  cell->set_delta_hi(-0.1686);
  cell->set_delta_level(0.0167);
  cell->set_mark("***");
  cell->set_decision("different");
  cell->set_decision_n(3);
  cell->set_decision_final(true);
  cell->set_level_kind("chance");
  cell->set_level(0.125);

  cell = AddCell(AddRow(&report, "tied"), 0.3201, 0.0050);
  cell->set_delta(-0.0009);
  cell->set_rel_delta(-0.0028);
  cell->set_has_test(true);
  cell->set_p_value(0.9);
  cell->set_decision("equivalent");
  cell->set_decision_n(5);
  cell->set_margin(0.02);
  return report;
}

}  // namespace

TEST_CASE("the table puts the banner first and reads undecided deltas as undecided", "[report]") {
  absl::StatusOr<std::string> table = RenderReport(ShortcutStudy(), "table");
  REQUIRE(table.ok());
  INFO(*table);
  const size_t banner = table->find(std::string("! ") + kBanner);
  REQUIRE(banner != std::string::npos);
  CHECK(banner < table->find("variant"));  // above the table
  CHECK(table->find("0.3210 ± 0.0236 [shortcut]") != std::string::npos);
  CHECK(table->find("0.1317 ± 0.0099 [chance]") != std::string::npos);
  // An undecided delta is shown with its interval and what it could have detected, so it does
  // not read as "no effect"; the verdict has its own column.
  CHECK(table->find("-0.0017 [-0.0200, +0.0166]") != std::string::npos);
  CHECK(table->find("undecided (n=3; detects |Δ|≥0.0300)") != std::string::npos);
  CHECK(table->find("-0.1893 [-0.2100, -0.1686] (-59.0%)") != std::string::npos);
  CHECK(table->find("different ***") != std::string::npos);
  CHECK(table->find("equivalent within ±0.02 (n=5)") != std::string::npos);
  CHECK(table->find("when the interval spans zero") != std::string::npos);  // the legend says why
  CHECK(table->find("not a bound on the effect") != std::string::npos);
  CHECK(table->find("[shortcut]: the mean is at that level") == std::string::npos);
  CHECK(table->find("[chance], [shortcut], [floor]") != std::string::npos);

  absl::StatusOr<std::string> md = RenderReport(ShortcutStudy(), "md");
  REQUIRE(md.ok());
  CHECK(md->rfind(std::string("! ") + kBanner, 0) == 0);
}

TEST_CASE("the JSON report carries each comparison's decision and n, levels and banners",
          "[report]") {
  const nlohmann::ordered_json json = api::ReportJson(ShortcutStudy());
  REQUIRE(json["banners"].size() == 1);
  CHECK(json["banners"][0] == kBanner);
  CHECK(json["adaptive"] == false);
  const nlohmann::ordered_json& rows = json["rows"];
  CHECK(rows[0]["metrics"]["eval/acc"]["decision"].is_null());
  CHECK(rows[0]["metrics"]["eval/acc"]["level"]["kind"] == "shortcut");
  CHECK(rows[0]["metrics"]["eval/acc"]["level"]["value"] == 0.3247);
  CHECK(rows[1]["metrics"]["eval/acc"]["decision"] == "undecided");
  CHECK(rows[1]["metrics"]["eval/acc"]["decision_n"] == 3);
  CHECK(rows[2]["metrics"]["eval/acc"]["decision"] == "different");
  CHECK(rows[3]["metrics"]["eval/acc"]["decision"] == "equivalent");
  CHECK(rows[3]["metrics"]["eval/acc"]["margin"] == 0.02);
  CHECK(rows[3]["metrics"]["eval/acc"]["level"].is_null());
  CHECK(rows[1]["metrics"]["eval/acc"]["decision_futile"] == false);
  // Every compared cell's interval, at the level that agrees with its verdict.
  CHECK(rows[1]["metrics"]["eval/acc"]["delta_ci95"] == nlohmann::ordered_json({-0.02, 0.0166}));
  CHECK(rows[1]["metrics"]["eval/acc"]["delta_level"] == 0.025);
  CHECK(rows[1]["metrics"]["eval/acc"]["detectable"] == 0.03);
  CHECK(rows[1]["metrics"]["eval/acc"]["p_adjusted"] == 1.0);
  CHECK(rows[3]["metrics"]["eval/acc"]["delta_ci95"].is_null());  // none sent: null, not [0, 0]
  CHECK(rows[3]["metrics"]["eval/acc"]["p_adjusted"].is_null());
}

TEST_CASE("an undecided comparison adaptive seeds stopped before max reads futile", "[report]") {
  tae::v1::ReportResponse report = ShortcutStudy();
  report.set_adaptive(true);
  report.mutable_rows(1)->mutable_cells(0)->set_decision_futile(true);
  absl::StatusOr<std::string> table = RenderReport(report, "table");
  REQUIRE(table.ok());
  INFO(*table);
  CHECK(table->find("undecided (n=3, futile; detects") != std::string::npos);
  CHECK(table->find("very likely not decide it either") != std::string::npos);  // the legend
  CHECK(api::ReportJson(report)["rows"][1]["metrics"]["eval/acc"]["decision_futile"] == true);
}

TEST_CASE("a comparison held at a failed seed says so and its row counts the failures",
          "[report]") {
  tae::v1::ReportResponse report = ShortcutStudy();
  report.set_adaptive(true);
  CHECK(api::ReportJson(report)["rows"][1]["runs_failed"] == 0);
  CHECK(api::ReportJson(report)["rows"][1]["metrics"]["eval/acc"]["decision_held"].is_null());
  tae::v1::ReportRow* row = report.mutable_rows(1);
  row->set_runs_failed(1);
  row->set_runs_total(row->runs_total() + 1);
  row->mutable_cells(0)->set_decision_held("r12 failed");
  absl::StatusOr<std::string> table = RenderReport(report, "table");
  REQUIRE(table.ok());
  INFO(*table);
  CHECK(table->find("undecided (n=3, held: r12 failed; detects") != std::string::npos);
  CHECK(table->find(" (1 failed)") != std::string::npos);
  const nlohmann::ordered_json json = api::ReportJson(report);
  CHECK(json["rows"][1]["runs_failed"] == 1);
  CHECK(json["rows"][1]["metrics"]["eval/acc"]["decision_held"] == "r12 failed");
}

}  // namespace tae::client
