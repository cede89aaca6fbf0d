#pragma once

// The ablation table: per variant, mean and standard deviation over seeds of each metric's final
// value, and the delta against the baseline variant. Pure, so the numbers are unit-tested.

#include <string>
#include <vector>

#include "server/store/records.h"

namespace tae::report {

struct Cell {
  std::string metric;
  int n = 0;
  double mean = 0;
  double std = 0;  // sample standard deviation (n - 1); 0 when n < 2
  bool has_delta = false;
  double delta = 0;
};

struct Row {
  std::string variant;
  int runs = 0;        // succeeded runs
  int runs_total = 0;  // all runs of the variant
  std::vector<Cell> cells;
};

// variants: in display order (baseline first); runs: every run of the experiment; values: the
// final values of the metrics; only succeeded runs count.
std::vector<Row> BuildReport(const std::vector<std::string>& variants,
                             const std::vector<store::RunRecord>& runs,
                             const std::vector<store::FinalValue>& values,
                             const std::vector<std::string>& metrics, const std::string& baseline);

}  // namespace tae::report
