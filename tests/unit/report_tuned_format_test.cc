// taectl report's tuned view (issue 27): each variant by its ablation with the chosen value of
// every grid key, in every format, and an asha [search]'s savings after the table.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "common/report_text/report_text.h"
#include "common/api/json.h"

namespace tae::client {

using report_text::RenderReport;
using report_text::SavingsText;
namespace {

void AddRow(tae::v1::ReportResponse* report, const std::string& ablation, const std::string& point,
            double mean, int candidates) {
  tae::v1::ReportRow* row = report->add_rows();
  row->set_ablation(ablation);
  row->set_point(point);
  row->set_variant(point.empty() ? ablation : ablation + "[" + point + "]");
  row->set_baseline("baseline[layers=2,lr=0.01]");
  row->set_runs(point.empty() ? 0 : 2);
  row->set_runs_total(6);
  row->set_points(3);
  row->set_candidates(candidates);
  row->set_params(NAN);
  row->set_flops_per_token(NAN);
  row->set_tokens_per_s(NAN);
  tae::v1::ReportCell* c = row->add_cells();
  c->set_metric("eval/loss");
  c->set_n(point.empty() ? 0 : 2);
  c->set_mean(mean);
  c->set_ci95(NAN);
  c->set_best(mean);
  if (ablation != "baseline" && !point.empty()) {
    c->set_has_delta(true);
    c->set_delta(mean - 1.0);
    c->set_rel_delta(mean - 1.0);
    c->set_decision("different");
    c->set_decision_n(2);
  }
}

tae::v1::ReportResponse Tuned() {
  tae::v1::ReportResponse report;
  report.mutable_experiment()->set_id(9);
  report.mutable_experiment()->set_name("sweep");
  report.mutable_experiment()->set_state("succeeded");
  report.set_baseline("baseline");
  report.add_metrics("eval/loss");
  report.set_view("tuned");
  report.set_search_metric("eval/loss");
  report.set_search_goal("min");
  AddRow(&report, "baseline", "layers=2,lr=0.01", 1.0, 3);
  AddRow(&report, "no-pos", "layers=4,lr=0.001", 1.5, 1);
  AddRow(&report, "no-attn", "", NAN, 0);
  tae::v1::SearchSavings* savings = report.mutable_experiment()->mutable_search_savings();
  savings->set_steps_run(3100);
  savings->set_steps_full(10000);
  savings->set_runs(18);
  savings->set_points_pruned(5);
  tae::v1::SearchRung* rung = savings->add_rungs();
  rung->set_rung(0);
  rung->set_step(50);
  rung->set_judged(9);
  rung->set_pruned(4);
  rung = savings->add_rungs();
  rung->set_rung(1);
  rung->set_step(150);
  rung->set_judged(3);
  rung->set_pruned(1);
  rung->set_nodata(1);
  return report;
}

}  // namespace

TEST_CASE("the tuned table shows each variant with its chosen grid values and the savings",
          "[report][tuned]") {
  absl::StatusOr<std::string> table = RenderReport(Tuned(), "table");
  REQUIRE(table.ok());
  INFO(*table);
  // Columns: variant, one per grid key, points (scored/all), runs.
  const size_t header = table->find("variant");
  REQUIRE(header != std::string::npos);
  const std::string head = table->substr(header, table->find('\n', header) - header);
  CHECK(head.find("layers") < head.find("lr"));
  CHECK(head.find("lr") < head.find("points"));
  CHECK(head.find("points") < head.find("runs"));
  CHECK(table->find("no-pos[") == std::string::npos);  // the ablation, not the variant name
  CHECK(table->find("0.001") != std::string::npos);
  CHECK(table->find("1/3") != std::string::npos);
  CHECK(table->find("at its own best grid point") != std::string::npos);
  CHECK(table->find("search: 31% of the full grid's steps (3100 of 10000") != std::string::npos);
  CHECK(table->find("pruned: rung 0 (step 50) 4 of 9, rung 1 (step 150) 1 of 3 (1 without data); "
                    "5 point(s) in all") != std::string::npos);

  absl::StatusOr<std::string> md = RenderReport(Tuned(), "md");
  REQUIRE(md.ok());
  CHECK(md->rfind("| variant | layers | lr | points | runs |", 0) == 0);
  CHECK(md->find("| no-pos | 4 | 0.001 | 1/3 | 2/6 |") != std::string::npos);
  CHECK(md->find("| no-attn | - | - | 0/3 | 0/6 |") != std::string::npos);
  CHECK(md->find("search: 31%") != std::string::npos);

  absl::StatusOr<std::string> latex = RenderReport(Tuned(), "latex");
  REQUIRE(latex.ok());
  CHECK(latex->find("% search: 31%") != std::string::npos);
  CHECK(latex->find("no-pos & 4 & 0.001 & 1/3") != std::string::npos);

  absl::StatusOr<std::string> csv = RenderReport(Tuned(), "csv");
  REQUIRE(csv.ok());
  CHECK(csv->rfind("variant,point,layers,lr,points,candidates,baseline,runs,runs_total,", 0) == 0);
  CHECK(
      csv->find("\nno-pos,\"layers=4,lr=0.001\",4,0.001,3,1,\"baseline[layers=2,lr=0.01]\",2,6,") !=
      std::string::npos);
  CHECK(csv->find("\nno-attn,,,,3,0,") != std::string::npos);
}

TEST_CASE("the report JSON says which view and each row's chosen point", "[report][tuned]") {
  const nlohmann::ordered_json json = api::ReportJson(Tuned());
  CHECK(json["view"] == "tuned");
  CHECK(json["search"]["metric"] == "eval/loss");
  CHECK(json["search"]["goal"] == "min");
  CHECK(json["rows"][1]["ablation"] == "no-pos");
  CHECK(json["rows"][1]["point_name"] == "layers=4,lr=0.001");
  CHECK(json["rows"][1]["point"]["layers"] == 4);
  CHECK(json["rows"][1]["point"]["lr"] == 0.001);
  CHECK(json["rows"][1]["candidates"] == 1);
  CHECK(json["rows"][2]["point"].is_null());
  CHECK(json["savings"]["steps_run"] == 3100);
  CHECK(json["savings"]["fraction"] == Approx(0.31));
  CHECK(json["savings"]["rungs"][1]["nodata"] == 1);

  // The per-point view keeps its shape: no point fields, no search.
  tae::v1::ReportResponse grid = Tuned();
  grid.set_view("grid");
  grid.mutable_experiment()->clear_search_savings();
  const nlohmann::ordered_json plain = api::ReportJson(grid);
  CHECK(plain["view"] == "grid");
  CHECK_FALSE(plain.contains("search"));
  CHECK_FALSE(plain.contains("savings"));
  CHECK_FALSE(plain["rows"][0].contains("point"));
  absl::StatusOr<std::string> table = RenderReport(grid, "table");
  REQUIRE(table.ok());
  CHECK(table->find("search:") == std::string::npos);
  CHECK(table->find("at the same grid point") != std::string::npos);
}

TEST_CASE("savings text without train.steps or rungs says so", "[report][tuned]") {
  tae::v1::SearchSavings savings;
  savings.set_runs_without_steps(2);
  CHECK(SavingsText(savings) ==
        "search: no run with train.steps; 2 run(s) without train.steps not counted\n"
        "pruned: no rung judged yet\n");
}

}  // namespace tae::client
