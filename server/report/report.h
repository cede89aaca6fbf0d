#pragma once

// The ablation table: per variant and metric, the mean over seeds of each run's final value with
// its 95% confidence interval (Student's t), the mean of each run's best value, and the delta
// against the variant's baseline (absolute, relative, and Welch's t-test p-value with a
// significance mark); plus parameters, FLOPs per token and throughput. Pure, so the numbers are
// unit-tested.

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "server/store/records.h"

namespace tae::report {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Cell {
  std::string metric;
  int n = 0;           // succeeded runs with a value
  double mean = kNaN;  // of the final values
  double std = kNaN;   // sample standard deviation (n - 1); NaN when n < 2
  double ci95 = kNaN;  // half-width of the 95% CI of the mean; NaN when n < 2
  double best = kNaN;  // mean over runs of the run's best value (min, or max when higher is better)
  bool has_delta = false;
  double delta = kNaN;      // mean - baseline mean
  double rel_delta = kNaN;  // delta / |baseline mean|
  bool has_test = false;    // both sides have >= 2 runs and not both are constant
  double p_value = kNaN;    // Welch's two-sided t-test of the final values against the baseline's
  std::string mark;         // "***" p < 0.001, "**" < 0.01, "*" < 0.05
};

struct Row {
  std::string variant;
  std::string baseline;  // the variant it is compared with ("baseline[layers=2]" at grid points)
  int runs = 0;          // succeeded runs
  int runs_total = 0;    // all runs of the variant
  std::vector<Cell> cells;
  double params = kNaN;           // mean model/params of its succeeded runs
  double flops_per_token = kNaN;  // mean model/flops_per_token
  double tokens_per_s = kNaN;     // mean of each run's last perf/tokens_per_s
};

// The metrics whose larger values are better: as `goal` says ("max"; an experiment's [report]
// goal), else accuracies and throughput; the others are losses.
bool HigherIsBetter(const std::string& metric, const std::map<std::string, std::string>& goal = {});

// The metrics BuildReport reads besides the table's own, for the size and speed columns.
std::vector<std::string> ExtraMetrics();

// variants: in display order (baseline first); runs: every run of the experiment; values: the
// final values of `metrics` and ExtraMetrics(); only succeeded runs count. Each variant is compared
// with spec::BaselineFor(variant, baseline).
std::vector<Row> BuildReport(const std::vector<std::string>& variants,
                             const std::vector<store::RunRecord>& runs,
                             const std::vector<store::FinalValue>& values,
                             const std::vector<std::string>& metrics, const std::string& baseline,
                             const std::map<std::string, std::string>& goal = {});

// Baseline rows first (in their order), then the others by decreasing |relative delta| of the
// first metric; rows without one keep their order at the end. Stable.
void SortByEffect(std::vector<Row>* rows);

}  // namespace tae::report
