#include "server/report/report.h"

#include <cmath>
#include <map>

#include "common/spec/spec.h"

namespace tae::report {
namespace {

Cell Summarise(const std::string& metric, const std::vector<double>& xs) {
  Cell cell;
  cell.metric = metric;
  cell.n = static_cast<int>(xs.size());
  if (xs.empty()) {
    return cell;
  }
  double sum = 0;
  for (double x : xs) {
    sum += x;
  }
  cell.mean = sum / xs.size();
  if (xs.size() >= 2) {
    double ss = 0;
    for (double x : xs) {
      ss += (x - cell.mean) * (x - cell.mean);
    }
    cell.std = std::sqrt(ss / (xs.size() - 1));
  }
  return cell;
}

}  // namespace

std::vector<Row> BuildReport(const std::vector<std::string>& variants,
                             const std::vector<store::RunRecord>& runs,
                             const std::vector<store::FinalValue>& values,
                             const std::vector<std::string>& metrics, const std::string& baseline) {
  std::map<std::string, Row> rows;
  for (const store::RunRecord& run : runs) {
    Row& row = rows[run.variant];
    row.variant = run.variant;
    row.runs_total += 1;
    if (run.state == store::RunState::kSucceeded) {
      row.runs += 1;
    }
  }
  // (variant, metric) -> final values of succeeded runs
  std::map<std::pair<std::string, std::string>, std::vector<double>> samples;
  for (const store::FinalValue& v : values) {
    if (v.state == store::RunState::kSucceeded) {
      samples[{v.variant, v.key}].push_back(v.value);
    }
  }
  std::vector<Row> out;
  for (const std::string& variant : variants) {
    Row row = rows[variant];
    row.variant = variant;
    for (const std::string& metric : metrics) {
      row.cells.push_back(Summarise(metric, samples[{variant, metric}]));
    }
    out.push_back(std::move(row));
  }
  // Each variant is compared with the baseline at its own grid point ("x[layers=2]" with
  // "baseline[layers=2]").
  std::map<std::string, std::vector<Cell>> cells_of;
  for (const Row& row : out) {
    cells_of[row.variant] = row.cells;
  }
  for (Row& row : out) {
    auto base = cells_of.find(spec::BaselineFor(row.variant, baseline));
    if (base == cells_of.end()) {
      continue;
    }
    for (size_t i = 0; i < row.cells.size(); ++i) {
      if (row.cells[i].n > 0 && base->second[i].n > 0) {
        row.cells[i].has_delta = true;
        row.cells[i].delta = row.cells[i].mean - base->second[i].mean;
      }
    }
  }
  return out;
}

}  // namespace tae::report
