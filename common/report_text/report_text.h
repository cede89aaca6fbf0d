#pragma once

// The ablation table's renderings as text (table, md, csv, latex) and a pivot of one metric over
// two keys: what `taectl report` prints and what taed serves as GET /api/experiments/ID/report.txt
// (the `tae` Python library's to_latex() and to_markdown()), from one implementation. Pure:
// ReportResponse / runs in, text out, so the output is unit-tested.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tae/v1/control.pb.h"

namespace tae::report_text {

// format: "table", "md", "csv" or "latex". The table and md forms show per metric
// "mean ± ci95", the mean best value and "Δ (Δ%) marks"; csv has one column per number; latex is a
// booktabs tabular.
// The tuned view (report.view() == "tuned") shows each variant by its ablation with the chosen
// value of every grid key and "points" (scored/all); an asha [search]'s savings
// (experiment.search_savings, SavingsText) follow the table.
absl::StatusOr<std::string> RenderReport(const tae::v1::ReportResponse& report,
                                         const std::string& format);

// The cost frontier of a report asked with a frontier (report.has_frontier()): a header naming
// the bar, the cost axis and which way is cheaper; one line per variant, cheapest first (variant,
// cost, mean ± CI, the CI's bounds, where it sits against the bar, "*" on the Pareto front); then
// the cheapest variant whose whole CI clears the bar, or "none clears it", and the variants whose
// cost is unknown.
std::string RenderFrontier(const tae::v1::ReportResponse& report);

// A [scale] ladder's fits (report.scale()): per grid point, each rung's N and overrides, each
// variant's effect at each rung as the table decides it, the exponent, each variant's
// multiplier and trend with their intervals, the extrapolation when asked, warnings and what the
// intervals and verdicts control.
std::string RenderScale(const tae::v1::ReportResponse& report);

// When no run reported a metric (report.no_metrics): why, how a command job reports
// (api::NoMetricsHint), and the last lines of one run's output to write a pattern against.
// Empty otherwise.
std::string NoMetricsText(const tae::v1::ReportResponse& report);

// "search: 31% of the full grid's steps (12400 of 40000; ...)\npruned: rung 0 (step 100) 6 of
// 9, rung 1 (step 300) 2 of 3; 8 point(s) in all\n".
std::string SavingsText(const tae::v1::SearchSavings& savings);

// One metric's mean ± 95% CI over the succeeded runs that share a value of `row_key` and of
// `col_key`: "variant" (the ablation name without the grid point) or any spec key
// ("train.task", "model.layers", ...), read from each run's config.
struct Pivot {
  std::string row_key, col_key, metric;
  std::vector<std::string> rows, cols;          // values in first-seen run order
  std::vector<std::vector<std::string>> cells;  // [row][col]: "mean ± ci (n)" or "-"
};
absl::StatusOr<Pivot> BuildPivot(const std::vector<tae::v1::Run>& runs, const std::string& spec,
                                 const std::string& metric);
// spec: "A×B" or "A,B".
absl::StatusOr<std::pair<std::string, std::string>> ParsePivotSpec(const std::string& spec);
std::string RenderPivot(const Pivot& pivot, const std::string& format);

}  // namespace tae::report_text
